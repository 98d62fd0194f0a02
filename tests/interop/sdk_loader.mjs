// sdk_loader.mjs - locate and import the pinned ACP TypeScript SDK.
//
// The SDK is not installed next to these scripts but into an ignored cache
// folder by tools/install-peers.sh (default <repo>/build/peers/acp, override
// with ACP_PEERS_DIR). ESM ignores NODE_PATH, so resolve the package from
// that folder explicitly and import it by file URL.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..', '..');
export const peersDir = process.env.ACP_PEERS_DIR || path.join(repoRoot, 'build', 'peers', 'acp');

// `sub` picks an export of the package: '' (the stable v1 API) or
// '/unstable' (v1 with the unstable methods, e.g. auth/status_update).
export async function loadSdk(sub = '') {
  const pkgJson = path.join(peersDir, 'package.json');
  if (!existsSync(path.join(peersDir, 'node_modules', '@agentclientprotocol', 'sdk'))) {
    throw new Error(`ACP SDK not installed in ${peersDir}; run tools/install-peers.sh first`);
  }
  const require = createRequire(pkgJson);
  const entry = require.resolve('@agentclientprotocol/sdk' + sub);
  return import(pathToFileURL(entry).href);
}

// Import another entry point of the pinned peers: a subpath export of the SDK
// ('@agentclientprotocol/sdk/experimental/ws-client') or a package ('ws').
export async function loadSdkModule(spec) {
  await loadSdk();
  const require = createRequire(path.join(peersDir, 'package.json'));
  const entry = require.resolve(spec);
  return import(pathToFileURL(entry).href);
}
