# fencepost: one image, both entrypoints: `controller` (Node, the ENTRYPOINT) and the agent sidecar
# (/app/bin/fencepost-agent, one executable compiled by Bun: `agent`, `exec`, `version`; the chart's
# sidecar sets it as the container's command). `fencepost agent` and `exec` on Node work too.
#
#   docker build -t fencepost:0.1.0 .              (or: hack/build-image.sh, no Docker engine needed)
#   docker run --rm fencepost:0.1.0 version
#   docker run --rm --entrypoint /app/bin/fencepost-agent fencepost:0.1.0 version
#
# Stages: production dependencies (deps), the TypeScript build and the agent executable (build),
# a distroless-style root carved out of the Node base (runtime-root: glibc, libstdc++, node, no
# shell, no package manager), and the runtime: FROM scratch with only those. The SBOM is syft's,
# made from the built image and attached to it in the registry (hack/release.sh).
# The RUN steps of deps and build are the ones `node hack/build-image-tree.ts` replays locally
# (without a container engine or root, for development);
# keep them relative to WORKDIR so that it can. test/unit/image lints this file.
#
# Runs as 65532:65532 and writes nothing to its filesystem: readOnlyRootFilesystem: true works
# (the chart sets it). hack/build-image.sh builds it with buildah and runs it with crun in the tests.

# The base, pinned by digest: the multi-platform index of node:24.21.0-bookworm-slim on Docker Hub.
# hack/build-image.sh checks this digest where Docker Hub answers; where it does not, it builds an
# equivalent base (Debian bookworm from mmdebstrap + the same Node) and passes its own reference.
ARG NODE_IMAGE=node:24.21.0-bookworm-slim@sha256:2fe369e969550cde8e867afc3fe370b260140cab4a23d467074295b42163d553

FROM ${NODE_IMAGE} AS deps
# Only for builders behind a TLS-intercepting proxy: a CA bundle mounted into the build (unset by
# default; build stages only, never in the runtime image).
ARG NODE_EXTRA_CA_CERTS
WORKDIR /deps
COPY package.json package-lock.json ./
# Source maps, type declarations and docs are not needed at run time (they are half of the size).
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && find node_modules -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.md' \) -delete

FROM ${NODE_IMAGE} AS build
ARG NODE_EXTRA_CA_CERTS
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src/ src/
COPY hack/build-agent.ts hack/files-key.ts hack/
# The controller runs on Node from dist/src; the agent sidecar (and `fencepost-agent exec`) is the
# same TypeScript compiled by Bun (the devDependency `bun`) into one executable, dist/bin/fencepost-agent.
RUN npm run build && node hack/build-agent.ts

# The runtime's root filesystem, distroless-style: the files of the five Debian packages that node
# and the agent link against (ldd: libc, libm, libdl, libpthread, libgcc_s, libstdc++), their dpkg
# records in var/lib/dpkg/status.d/ (the layout scanners such as trivy, grype and syft read), the
# base's node binary, passwd/group with nonroot (65532), and the empty mount points a runtime
# mounts over (proc, sys, dev, run: a rootless runtime cannot create them in a root-owned image). No shell, no dpkg, no apt, no npm:
# nothing in the image can install or run what we did not put there. Carved from the Node base
# rather than taken from a second base image: one digest to pin, and the libraries are the ones
# this node was built against. (Paths are absolute by nature: the local replay skips -root stages.)
FROM ${NODE_IMAGE} AS runtime-root
WORKDIR /rootfs
RUN set -eu; pkgs="base-files libc6 libgcc-s1 libstdc++6 gcc-12-base"; \
    mkdir -p var/lib/dpkg/status.d etc tmp home/nonroot usr/local/bin proc sys dev run; \
    for p in $pkgs; do \
      dpkg-query -L "$p" | while read -r f; do \
        case "$f" in /usr/share/doc/*/copyright) ;; /usr/share/doc/*|/usr/share/man/*|/usr/share/lintian/*|/usr/share/locale/*|/usr/share/info/*) continue;; esac; \
        if [ -f "$f" ] || [ -L "$f" ]; then printf '%s\n' ".$f"; fi; \
      done; \
      dpkg-query -s "$p" > "var/lib/dpkg/status.d/$p"; \
    done > /files.txt; \
    for l in lib lib64 bin sbin; do mkdir -p "usr/$l"; if [ -L "/$l" ]; then ln -s "usr/$l" "$l"; fi; done; \
    (cd / && tar --no-recursion -cf - -T /files.txt) | tar -xf -; \
    cp -a /usr/local/bin/node usr/local/bin/node; \
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > etc/passwd; \
    printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' > etc/group; \
    chmod 1777 tmp; chown 65532:65532 home/nonroot

FROM scratch
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
COPY --from=runtime-root /rootfs/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin NODE_ENV=production
WORKDIR /app
COPY --from=deps /deps/package.json ./package.json
COPY --from=deps /deps/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
COPY --from=build /src/dist/bin/fencepost-agent ./bin/fencepost-agent
COPY crds/ ./crds/
LABEL org.opencontainers.image.title="fencepost" \
      org.opencontainers.image.description="Kubernetes leader election and distributed locks with fencing tokens: the controller and the agent sidecar" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/fencepost/fencepost" \
      org.opencontainers.image.documentation="https://github.com/fencepost/fencepost#readme" \
      org.opencontainers.image.vendor="fencepost" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="docker.io/library/node:24.21.0-bookworm-slim"
USER 65532:65532
# --max-semi-space-size=4: V8 otherwise grows the young generation to 128 MiB on a large host
# (64 MiB semi-spaces), which the controller's cold start fills with short-lived garbage.
# --heap-growing-percent=50: the next full collection once the old generation is 1.5 times what
# the last one kept, where V8 otherwise picks up to 4 times on a large host. At 10,000 locks the
# first took the peak from 479 to 302 MiB, and the second from 274 to 246-249 MiB; the
# controller's CPU did not move (bench/scale.ts reads these flags from here and measures with
# them; docs/operations.md "Sizing"). Node refuses the second in NODE_OPTIONS, so a pod
# `command:` that replaces this ENTRYPOINT must pass it to node.
ENTRYPOINT ["/usr/local/bin/node", "--max-semi-space-size=4", "--heap-growing-percent=50", "/app/dist/src/cli/main.js"]
CMD ["--help"]
