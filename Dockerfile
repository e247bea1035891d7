# fencepost: one image, both entrypoints: `controller` (Node, the ENTRYPOINT) and the agent sidecar
# (/app/bin/fencepost-agent, one executable compiled by Bun: `agent`, `exec`, `version`; the chart's
# sidecar sets it as the container's command). `fencepost agent` and `exec` on Node work too.
#
# Three stages: production dependencies, the TypeScript build, and the runtime with only those two.
# The RUN steps of the first two stages are the ones `node hack/build-image-tree.ts` runs locally
# and test/integration/image runs in every test run (there is no Docker engine on the build
# machines); keep them relative to WORKDIR so that they can. test/unit/image lints this file.
#
#   docker build -t fencepost:0.1.0 .
#   docker run --rm fencepost:0.1.0 version
#   docker run --rm --entrypoint /app/bin/fencepost-agent fencepost:0.1.0 version
#
# Runs as 65532:65532 and writes nothing to its filesystem: readOnlyRootFilesystem: true works
# (the chart sets it). The base image is pinned by version; pin it by digest in your registry.

FROM node:24.21.0-bookworm-slim AS deps
WORKDIR /deps
COPY package.json package-lock.json ./
# Source maps, type declarations and docs are not needed at run time (they are half of the size).
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && find node_modules -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.md' \) -delete

FROM node:24.21.0-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src/ src/
COPY hack/build-agent.ts hack/
# The controller runs on Node from dist/src; the agent sidecar (and `fencepost-agent exec`) is the
# same TypeScript compiled by Bun (the devDependency `bun`) into one executable, dist/bin/fencepost-agent.
RUN npm run build && node hack/build-agent.ts

FROM node:24.21.0-bookworm-slim
# npm, npx, corepack and yarn are not needed at run time: less to scan, less to exploit.
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /opt/yarn-* \
      /usr/local/bin/yarn /usr/local/bin/yarnpkg
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /deps/package.json ./package.json
COPY --from=deps /deps/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
COPY --from=build /src/dist/bin/fencepost-agent ./bin/fencepost-agent
COPY crds/ ./crds/
USER 65532:65532
ENTRYPOINT ["node", "/app/dist/src/cli/main.js"]
CMD ["--help"]
