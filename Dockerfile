# syntax=docker/dockerfile:1

# Stage 1: the full toolchain compiles src/ to dist/ (tsc, strict), so an image only holds code that compiles.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY migrations ./migrations
RUN npm run build

# Stage 2: production dependencies only, the compiled service with its migrations, a non-root user.
# The server runs as plain JavaScript (a worker at rest needs ~65 MB less memory than under tsx).
FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/app/data
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# DATA_DIR is only used without DATABASE_URL (embedded PostgreSQL); it must belong to the runtime user.
RUN mkdir -p /app/data && chown node:node /app/data
USER node
EXPOSE 3000
# ROLE=all|api|worker picks what this container runs; see docker-compose.yml.
# The live heap stays ~35 MB whatever the audience size (devices are streamed in pages). The old generation
# is capped, so memory stays bounded, and may grow to 3x the live heap between full collections: under a
# cap this small V8 would let it grow by only 1.3x and re-mark the whole heap every ~20 MB promoted
# (see README, Performance).
CMD ["node", "--max-old-space-size=192", "--heap-growing-percent=200", "dist/src/main.js"]
