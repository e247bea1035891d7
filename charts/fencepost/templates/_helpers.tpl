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
fencepost.labels are the standard app.kubernetes.io/* labels on every resource.
*/}}
{{- define "fencepost.labels" -}}
helm.sh/chart: {{ include "fencepost.chart" . }}
{{ include "fencepost.selectorLabels" . }}
app.kubernetes.io/version: {{ (default .Chart.AppVersion .Values.image.tag) | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fencepost
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
fencepost.image is "<repository>:<tag>", the tag defaulting to the chart's appVersion.
*/}}
{{- define "fencepost.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
fencepost.redisUrl is .Values.fencing.redisUrl when the backend is Redis (failing with a clear
message when it is empty), else empty.
*/}}
{{- define "fencepost.redisUrl" -}}
{{- if eq .Values.fencing.backend "Redis" }}
{{- required "fencing.redisUrl is required when fencing.backend is Redis (e.g. --set fencing.redisUrl=redis://redis:6379)" .Values.fencing.redisUrl }}
{{- end }}
{{- end }}
