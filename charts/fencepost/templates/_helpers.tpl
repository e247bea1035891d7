{{/*
fencepost.name is the chart name, or .Values.nameOverride; truncated to 63 characters (DNS label).
*/}}
{{- define "fencepost.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
fencepost.fullname is the prefix of every resource name: .Values.fullnameOverride, else
"<release>-<name>" (just "<release>" when it already contains the name); 63 characters at most.
*/}}
{{- define "fencepost.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
fencepost.chart is "<chart>-<version>" for the helm.sh/chart label.
*/}}
{{- define "fencepost.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
fencepost.labels are the standard app.kubernetes.io/* labels on every resource, without the
component: each template adds its own (controller, agent, test), or uses fencepost.controllerLabels.
*/}}
{{- define "fencepost.labels" -}}
helm.sh/chart: {{ include "fencepost.chart" . }}
app.kubernetes.io/name: {{ include "fencepost.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ (default .Chart.AppVersion .Values.image.tag) | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fencepost
{{- end }}

{{/*
fencepost.controllerLabels are fencepost.labels plus app.kubernetes.io/component: controller.
*/}}
{{- define "fencepost.controllerLabels" -}}
{{ include "fencepost.labels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{/*
fencepost.selectorLabels select the controller pods (immutable in a Deployment: keep them stable).
*/}}
{{- define "fencepost.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fencepost.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{/*
fencepost.serviceAccountName is the controller's ServiceAccount: .Values.serviceAccount.name, else
the full name when the chart creates it, else "default".
*/}}
{{- define "fencepost.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fencepost.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
fencepost.image is the controller's image: fencepost.defaultImage (this release's, pinned by digest
in a published chart) unless image.repository is set; then "<repository>:<tag>", the tag
defaulting to the chart's appVersion, with "@<digest>" when image.digest is set.
*/}}
{{- define "fencepost.image" -}}
{{- if .Values.image.repository }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- with .Values.image.digest }}@{{ . }}{{ end }}
{{- else }}
{{- include "fencepost.defaultImage" . }}
{{- end }}
{{- end }}

{{/*
fencepost.redisUrl is .Values.fencing.redisUrl when the backend is Redis and no Secret is named
(failing with a clear message when both are empty), else empty.
*/}}
{{- define "fencepost.redisUrl" -}}
{{- if and (eq .Values.fencing.backend "Redis") (not .Values.fencing.redisUrlSecret.name) }}
{{- required "fencing.redisUrl is required when fencing.backend is Redis (e.g. --set fencing.redisUrl=redis://redis:6379), or name a Secret in fencing.redisUrlSecret.name" .Values.fencing.redisUrl }}
{{- end }}
{{- end }}

{{/*
fencepost.controllerRules are the controller's permissions on the objects it manages, and no more:
each verb is one the code uses (test/e2e/rbac.test.ts runs the controller with exactly these and
checks that every other verb is denied). Shared by the ClusterRole (all namespaces) and the
per-namespace Roles (watchNamespaces).
*/}}
{{- define "fencepost.controllerRules" -}}
- apiGroups: ["fencepost.io"]
  resources: ["distributedlocks"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["fencepost.io"]
  resources: ["distributedlocks/status"]
  verbs: ["patch"]
- apiGroups: ["fencepost.io"]
  resources: ["distributedlocks/finalizers"]
  verbs: ["update"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "list", "watch", "create", "update", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/*
fencepost.redisSecretName is fencing.redisUrlSecret.name when the backend is Redis, else empty.
*/}}
{{- define "fencepost.redisSecretName" -}}
{{- if eq .Values.fencing.backend "Redis" }}{{ .Values.fencing.redisUrlSecret.name }}{{ end }}
{{- end }}

{{/*
fencepost.dashboardLabels are fencepost.labels plus app.kubernetes.io/component: dashboard.
*/}}
{{- define "fencepost.dashboardLabels" -}}
{{ include "fencepost.labels" . }}
app.kubernetes.io/component: dashboard
{{- end }}

{{/*
fencepost.dashboardSelectorLabels select the dashboard pod; the component keeps them apart from
the controller's (two Deployments must never select each other's pods).
*/}}
{{- define "fencepost.dashboardSelectorLabels" -}}
app.kubernetes.io/name: {{ include "fencepost.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: dashboard
{{- end }}

{{/*
fencepost.dashboardPort is the port of dashboard.address (the container port and the Service's).
*/}}
{{- define "fencepost.dashboardPort" -}}
{{- regexFind "[0-9]+$" .Values.dashboard.address }}
{{- end }}

{{/*
fencepost.dashboardLoopback is "true" when dashboard.address is a loopback address (as the
command's own check: 127.0.0.0/8, ::1, localhost), else empty. An empty host is every interface.
*/}}
{{- define "fencepost.dashboardLoopback" -}}
{{- $host := regexReplaceAll ":[0-9]+$" .Values.dashboard.address "" | trimPrefix "[" | trimSuffix "]" }}
{{- if or (eq $host "localhost") (eq $host "::1") (regexMatch "^127(\\.[0-9]{1,3}){3}$" $host) }}true{{ end }}
{{- end }}

{{/*
fencepost.dashboardRules are what `fencepost dashboard` reads, and nothing else: it watches the
locks, their Leases and Events (informers: list and watch), and its page's links get a Lease or
a pod and list a lock's Events. No write verb: the dashboard is read-only by its RBAC, not only
by its code (test/integration/chart/dashboard.test.ts checks both).
*/}}
{{- define "fencepost.dashboardRules" -}}
- apiGroups: ["fencepost.io"]
  resources: ["distributedlocks"]
  verbs: ["list", "watch"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get"]
{{- end }}
