// What the interop drivers share: the bearer token on every request, and checks that record
// what the SDK saw (or the error it threw) under a name, printed as one JSON object.

// mastif's loopback servers want their bearer token on every request (docs/protocols.md);
// `fetched` lists every URL the SDK fetched, in order
export function authFetchFor(token) {
  const fetched = [];
  const authFetch = (input, init = {}) => {
    fetched.push(String(input instanceof Request ? input.url : input));
    const headers = new Headers(init.headers ?? {});
    headers.set('Authorization', `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };
  return { fetched, authFetch };
}

// `codeOf(err)`: the protocol error code an SDK's error carries (each SDK puts it elsewhere)
export function checks(codeOf = (err) => err?.code ?? null) {
  const out = {};
  async function check(name, fn) {
    try {
      out[name] = await fn();
    } catch (err) {
      out[name] = { error: err?.constructor?.name ?? 'Error', code: codeOf(err), message: String(err?.message ?? err) };
    }
  }
  const print = () => process.stdout.write(JSON.stringify(out) + '\n');
  return { out, check, print };
}
