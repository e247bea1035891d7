#!/usr/bin/env bash
# release.sh — publishes a fencepost release to an OCI registry, the way users consume it:
#
#   the image (both entrypoints: the controller and /app/bin/fencepost-agent) as an image index
#     REGISTRY/fencepost:VERSION, each platform's manifest pinned by digest;
#   its SBOM (CycloneDX, syft) and a signature (cosign) attached to each platform's manifest as
#     OCI referrers;
#   the Helm chart as an OCI artifact, oci://REGISTRY/charts/fencepost VERSION, whose appVersion is
#     VERSION and whose image (templates/_image.tpl) is the index pinned by digest; and the library
#     chart oci://REGISTRY/charts/fencepost-sidecar VERSION (the agent sidecar's named templates,
#     for application charts to depend on), its image pinned the same way.
#
# Usage: hack/release.sh VERSION [REGISTRY]
#   VERSION   package.json's version, or a prerelease of it (0.1.0, 0.1.0-rc.1)
#   REGISTRY  host[:port][/namespace]; default $FENCEPOST_REGISTRY, else the running testbed's
#             registry (npm run testbed:up -- --with-registry) with /fencepost. Loopback hosts are
#             spoken to over plain HTTP, every other host over HTTPS.
#
# Environment:
#   COSIGN_KEY, COSIGN_PASSWORD   the signing key (a cosign key file, or any KMS reference cosign
#                                 takes); unset: a key pair is made for this run beside the output
#                                 and the release says so
#   FENCEPOST_RELEASE_OUT         output folder (default dist/release/VERSION): release.json, the
#                                 chart package, the SBOMs, cosign.pub
#
# Prints the summary (registry, digests per platform, chart reference, referrers) on standard
# error and the result as JSON on standard output. Tools: hack/build-image.sh (the image),
# hack/testbed/build.sh helm oras syft cosign (built from Go modules, cached).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
node_bin=$(hack/bootstrap-node.sh)
exec "$node_bin/node" hack/release.ts "$@"
