# Placeholder until the image is built for real (issue 6): the layout it will use.
FROM node:24-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev
COPY dist/ dist/
COPY crds/ crds/
USER 65532:65532
ENTRYPOINT ["node", "dist/src/cli/main.js"]
