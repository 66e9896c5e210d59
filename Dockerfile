# syntax=docker/dockerfile:1
# Build: compile TypeScript with dev dependencies, then keep only what runs.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
# The provider console, bundled into dist/console by the same build.
COPY console ./console
COPY scripts ./scripts
# npm ci runs the approved install scripts (allowScripts) and `prepare`, which compiles to dist/.
RUN npm ci && npm prune --omit=dev

# Run: no compilers, no dev dependencies, an unprivileged user (PostgreSQL refuses to run as root anyway).
FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    PGTOLL_HOST=0.0.0.0 \
    PGTOLL_DATA_DIR=/data
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 3000 6543
HEALTHCHECK --interval=30s --timeout=5s CMD node -e "fetch('http://127.0.0.1:'+(process.env.PGTOLL_HTTP_PORT||3000)+'/api/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
ENTRYPOINT ["node", "dist/cli.js"]
CMD ["start"]
