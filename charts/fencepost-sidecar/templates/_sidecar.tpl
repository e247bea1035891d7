{{/*
The fencepost agent as a native sidecar, for an application chart's pods. Depend on this chart
(Chart.yaml `dependencies:` with repository oci://…/charts) and include:

  spec:
    serviceAccountName: fencepost-agent
    initContainers:
      {{- include "fencepost-sidecar.container" .Values.fencepostSidecar | nindent 6 }}
    containers:
      - name: app
        volumeMounts:
          {{- include "fencepost-sidecar.stateMount" .Values.fencepostSidecar | nindent 10 }}
    volumes:
      {{- include "fencepost-sidecar.volume" .Values.fencepostSidecar | nindent 6 }}

Every template takes one dict: a block of the app chart's values, or a (dict …) literal.
  locks        list of lock names (required): one --lock each
  image        the fencepost image; default fencepost-sidecar.defaultImage (the sidecar runs its
               /app/bin/fencepost-agent: the agent compiled into one executable)
  listen       the loopback lock API; default 127.0.0.1:7370 (clients look there first)
  probePort    the kubelet's /healthz and /readyz port; default 7371
  metricsPort  the Prometheus /metrics port; default 7372 (the port is named `metrics`, which the
               fencepost chart's agent PodMonitor scrapes)
  stateDir     where the agent writes <lock>.json while it holds a lock (--state-dir), on an
               emptyDir volume `fencepost-state` that the app mounts read-only (stateMount);
               default none: no flag, no volume, no mount
  extraArgs    more agent flags; default none
  resources    default requests cpu 10m, memory 64Mi; limits memory 128Mi
The ports are given to the agent explicitly, so the probes find it: an explicit address that is
taken stops the agent naming the flag (only the agent's defaults move to a free port).
The pod needs serviceAccountName fencepost-agent (the fencepost chart's agentRbac.namespaces).
*/}}

{{/* fencepost-sidecar.container: one entry of the pod's initContainers (restartPolicy Always). */}}
{{- define "fencepost-sidecar.container" -}}
{{- $locks := required "fencepost-sidecar.container: locks (a list of lock names) is required" .locks -}}
{{- $probePort := .probePort | default 7371 -}}
{{- $metricsPort := .metricsPort | default 7372 -}}
{{- $resources := .resources | default (dict "requests" (dict "cpu" "10m" "memory" "64Mi") "limits" (dict "memory" "128Mi")) -}}
- name: fencepost-agent
  image: {{ .image | default (include "fencepost-sidecar.defaultImage" .) }}
  restartPolicy: Always
  command:
    - /app/bin/fencepost-agent
  args:
    - agent
    {{- range $locks }}
    - --lock={{ . }}
    {{- end }}
    - --listen={{ .listen | default "127.0.0.1:7370" }}
    - --health-probe-bind-address=:{{ $probePort }}
    - --metrics-bind-address=:{{ $metricsPort }}
    {{- with .stateDir }}
    - --state-dir={{ . }}
    {{- end }}
    {{- range .extraArgs }}
    - {{ . }}
    {{- end }}
  env:
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    - name: POD_UID
      valueFrom:
        fieldRef:
          fieldPath: metadata.uid
  ports:
    - name: metrics
      containerPort: {{ $metricsPort }}
    - name: probes
      containerPort: {{ $probePort }}
  startupProbe:
    httpGet:
      path: /readyz
      port: probes
    periodSeconds: 1
    failureThreshold: 120
  readinessProbe:
    httpGet:
      path: /readyz
      port: probes
    periodSeconds: 10
  resources:
    {{- toYaml $resources | nindent 4 }}
  {{- with .stateDir }}
  volumeMounts:
    - name: fencepost-state
      mountPath: {{ . }}
  {{- end }}
  securityContext:
    runAsNonRoot: true
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop: [ALL]
    seccompProfile:
      type: RuntimeDefault
{{- end }}

{{/* fencepost-sidecar.volume: the pod's volume for the state files (nothing without stateDir). */}}
{{- define "fencepost-sidecar.volume" -}}
{{- if .stateDir }}
- name: fencepost-state
  emptyDir:
    medium: Memory
    sizeLimit: 1Mi
{{- end }}
{{- end }}

{{/* fencepost-sidecar.stateMount: the app container's read-only mount of the state files (nothing without stateDir). */}}
{{- define "fencepost-sidecar.stateMount" -}}
{{- with .stateDir }}
- name: fencepost-state
  mountPath: {{ . }}
  readOnly: true
{{- end }}
{{- end }}
