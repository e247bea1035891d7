{{/*
fencepost-sidecar.defaultImage is the fencepost image the sidecar runs unless the app chart names
one: the same reference as the fencepost chart's fencepost.defaultImage (a unit test checks), and
hack/release.sh pins both by digest in the charts it publishes: REGISTRY/fencepost:VERSION@sha256:….
*/}}
{{- define "fencepost-sidecar.defaultImage" -}}
ghcr.io/fencepost/fencepost:0.1.0
{{- end }}
