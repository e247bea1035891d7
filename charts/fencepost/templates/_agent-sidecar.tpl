{{/*
fencepost.agentSidecar renders the fencepost agent as a native sidecar: one entry of a pod's
initContainers (restartPolicy: Always; Kubernetes >= 1.29, GA in 1.33), with the downward-API
identity, the probe and metrics ports, a startupProbe that holds the application back until the
agent's Lease watches have synced, a readinessProbe, resources and a locked-down securityContext.
It is what examples/singleton-deployment.yaml has between its BEGIN/END markers (a test checks).

Use it from a chart that has fencepost as a dependency:

  initContainers:
    {{- include "fencepost.agentSidecar" (dict "locks" (list "singleton")) | nindent 4 }}

Parameters (a dict):
  locks       list of lock names (required): one --lock each
  image       the fencepost image; default this chart release's (fencepost.defaultImage; the sidecar runs its
              /app/bin/fencepost-agent: the agent compiled into one executable)
  listen      the loopback lock API; default 127.0.0.1:7370
  probePort   the kubelet's /healthz and /readyz port; default 8081
  metricsPort the Prometheus /metrics port; default 8080
  extraArgs   more agent flags (e.g. "--state-dir=/var/run/fencepost"); default none
  resources   default requests cpu 10m, memory 64Mi; limits memory 128Mi (the agent holds about 56 MiB)
The pod needs serviceAccountName fencepost-agent (agentRbac.namespaces).
*/}}
{{- define "fencepost.agentSidecar" -}}
{{- $locks := required "fencepost.agentSidecar: locks (a list of lock names) is required" .locks -}}
{{- $probePort := .probePort | default 8081 -}}
{{- $metricsPort := .metricsPort | default 8080 -}}
{{- $resources := .resources | default (dict "requests" (dict "cpu" "10m" "memory" "64Mi") "limits" (dict "memory" "128Mi")) -}}
- name: fencepost-agent
  image: {{ .image | default (include "fencepost.defaultImage" .) }}
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
  securityContext:
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop: [ALL]
{{- end }}
