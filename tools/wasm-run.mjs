// Runs a wasm32-wasi command module under Node's built-in WASI and exits
// with its status. Usage: node wasm-run.mjs FILE.wasm [ARGS...]
import { readFile } from 'node:fs/promises';
import { WASI } from 'node:wasi';
import process from 'node:process';

process.removeAllListeners('warning');
const [file, ...args] = process.argv.slice(2);
const wasi = new WASI({ version: 'preview1', args: [file, ...args], env: {},
                        returnOnExit: true });
const mod = await WebAssembly.compile(await readFile(file));
const inst = await WebAssembly.instantiate(mod, wasi.getImportObject());
process.exitCode = wasi.start(inst);
