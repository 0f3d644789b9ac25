// Process helpers shared by the server tests: the --bin argument, starting `diskformer serve`
// on a free loopback port (resolved once it prints its address), and waiting for its exit.
import { spawn } from 'node:child_process';

// The path after --bin on the command line; exits 2 with a usage line when it is missing.
export function binArg(script) {
  const args = process.argv.slice(2);
  const i = args.indexOf('--bin');
  const bin = i < 0 ? undefined : args[i + 1];
  if (!bin) {
    console.error(`usage: ${script} --bin path/to/diskformer`);
    process.exit(2);
  }
  return bin;
}

// Spawns `bin serve --port 0 ...args`; resolves with the process once it says where it listens
// (proc.port set, proc.stderrText() the stderr so far), rejects if it exits before that.
export function startServe(bin, args) {
  return new Promise((resolve, reject) => {
    const proc = spawn(bin, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    proc.stderr.on('data', (d) => { err += d; });
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m && !proc.port) {
        proc.port = Number(m[1]);
        resolve(proc);
      }
    });
    proc.on('exit', (code) => { if (!proc.port) reject(new Error(`server exited ${code}: ${err}`)); });
    proc.stderrText = () => err;
  });
}

// Resolves with the exit code (or the signal's name) once the process has ended.
export function exited(proc) {
  return new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) resolve(proc.exitCode ?? proc.signalCode);
    else proc.on('exit', (code, sig) => resolve(code ?? sig));
  });
}
