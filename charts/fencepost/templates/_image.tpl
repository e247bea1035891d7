{{/*
fencepost.defaultImage is the fencepost image this chart release runs: the one source of the image's
name and tag for every template (the controller, the dashboard, the agent sidecar helper), and the
reference the examples and docs quote (a unit test checks they agree). hack/release.sh rewrites
this file in the chart it publishes, pinning the image it pushed by digest:
REGISTRY/fencepost:VERSION@sha256:….
*/}}
{{- define "fencepost.defaultImage" -}}
ghcr.io/fencepost/fencepost:0.1.0
{{- end }}
