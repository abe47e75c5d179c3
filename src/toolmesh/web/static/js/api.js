// The Workbench's one way to the gateway: the public /api/v1, REST and WebSocket, with the
// token the user logged in with. No private routes: everything here a user could do with
// curl or the CLI, and the gateway admits, scopes and masks it the same way.

const TOKEN_KEY = "toolmesh.token";
const WORKSPACE_KEY = "toolmesh.workspace";

/** A failed call: type and message as the gateway or the service said them. */
export class ApiError extends Error {
  constructor(type, message, status = 0) {
    super(message);
    this.name = "ApiError";
    this.type = type;
    this.status = status;
  }
}

function failure(body, status) {
  const error = body && typeof body === "object" ? body.error : null;
  if (error && typeof error === "object") {
    return new ApiError(String(error.type || "error"), String(error.message || "failed"), status);
  }
  return null;
}

/** The JSON value of a config item's text (items that are not JSON stay text). */
export function parseValue(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export class Api {
  constructor() {
    // sessionStorage: the token lives as long as the tab, is not shared with other tabs or
    // sites, and is never written to a cookie (so no request carries it unless we add it).
    this.token = sessionStorage.getItem(TOKEN_KEY) || "";
    this.workspace = sessionStorage.getItem(WORKSPACE_KEY) || "default";
    this.flow = "default";
    this._socket = null;
    this._pending = new Map();
    this._next = 1;
  }

  setToken(token) {
    this.token = token;
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
    this.closeSocket();
  }

  setWorkspace(workspace) {
    this.workspace = workspace;
    sessionStorage.setItem(WORKSPACE_KEY, workspace);
  }

  headers(extra = {}) {
    const headers = { "Content-Type": "application/json", "X-Workspace": this.workspace, ...extra };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    return headers;
  }

  /**
   * POST one request to a service; resolves to the response body, rejects with ApiError.
   * flow: for per-flow services (agent, mcp-tool, tool-service, prompt...), else omit.
   */
  async call(service, body, { flow = null, timeout = null } = {}) {
    const path = flow ? `/api/v1/flow/${encodeURIComponent(flow)}/service/${encodeURIComponent(service)}`
      : `/api/v1/${encodeURIComponent(service)}`;
    const extra = timeout ? { "X-Timeout": String(timeout) } : {};
    let response;
    try {
      response = await fetch(path, {
        method: "POST", headers: this.headers(extra), body: JSON.stringify(body),
        credentials: "omit", cache: "no-store",
      });
    } catch (e) {
      throw new ApiError("unreachable", `the gateway did not answer: ${e.message}`);
    }
    let data = null;
    try {
      data = await response.json();
    } catch {
      throw new ApiError("bad-response", `the gateway answered ${response.status} without JSON`,
        response.status);
    }
    const error = failure(data, response.status);
    if (error) throw error;
    if (!response.ok) throw new ApiError("http-error", `HTTP ${response.status}`, response.status);
    return data;
  }

  // -- who am I --------------------------------------------------------------------------

  /**
   * Whether the gateway takes this tab's token (or, with none, needs one): asked on the
   * WebSocket, whose refusal is an `auth-failed` frame — a refused REST call would be a 401,
   * which the browser logs as an error on every start without a token. Rejects with the
   * ApiError of the refusal (type `auth-failed`, or the gateway's: `auth-throttled`...);
   * resolves when the token is taken, or when no WebSocket can be opened at all (a proxy
   * that passes no WebSocket: the next REST call then asks instead).
   */
  async authenticate() {
    try {
      await this._open();
    } catch (e) {
      if (e instanceof ApiError && e.type === "unreachable") return;
      throw e;
    }
  }

  /** {id, name, workspace, roles: capabilities}: the token's own view of itself. */
  async whoami() {
    const data = await this.call("iam", { operation: "whoami" });
    return data.user;
  }

  async workspaces() {
    const data = await this.call("iam", { operation: "list-my-workspaces" });
    return (data.workspaces || []).map((w) => w.id);
  }

  // -- config (TrustGraph's operations; secrets come back as ***) ------------------------

  /** {type: {key: value}} of the workspace, values parsed from their JSON text. */
  async configAll() {
    const data = await this.call("config", { operation: "config" });
    const out = {};
    for (const [type, items] of Object.entries(data.config || {})) {
      out[type] = {};
      for (const [key, text] of Object.entries(items)) out[type][key] = parseValue(text);
    }
    return { version: data.version, config: out };
  }

  /** [{key, value}] of one type, sorted by key; values parsed. */
  async values(type) {
    const data = await this.call("config", { operation: "getvalues", type });
    return (data.values || []).map((v) => ({ key: v.key, value: parseValue(v.value) }))
      .sort((a, b) => a.key.localeCompare(b.key));
  }

  async get(type, key) {
    const data = await this.call("config", { operation: "get", keys: [{ type, key }] });
    const found = (data.values || [])[0];
    return found ? parseValue(found.value) : undefined;
  }

  /** Store items: [{type, key, value}] (value: an object, stored as its JSON text). */
  async put(items) {
    const values = items.map(({ type, key, value }) => ({
      type, key, value: typeof value === "string" ? value : JSON.stringify(value),
    }));
    return this.call("config", { operation: "put", values });
  }

  async remove(type, key) {
    return this.call("config", { operation: "delete", keys: [{ type, key }] });
  }

  // -- the WebSocket: streamed answers (agent, tool invocations) -----------------------------

  _open() {
    if (this._socket) return this._socket;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    this._socket = new Promise((resolve, reject) => {
      const ws = new WebSocket(`${scheme}://${location.host}/api/v1/socket`);
      let ready = false;
      ws.addEventListener("open", () => ws.send(JSON.stringify({ type: "auth", token: this.token })));
      ws.addEventListener("message", (event) => {
        let frame;
        try {
          frame = JSON.parse(event.data);
        } catch {
          return;
        }
        if (!ready) {
          if (frame.type === "auth-ok") {
            ready = true;
            resolve(ws);
          } else if (frame.type === "auth-failed") {
            const said = typeof frame.error === "string" ? frame.error : frame.error?.message;
            reject(new ApiError(String(frame["error-type"] || "auth-failed"),
              String(frame.message || said || "the token was refused")));
            ws.close();
          }
          return;
        }
        this._dispatch(frame);
      });
      const closed = () => {
        if (!ready) reject(new ApiError("unreachable", "the WebSocket closed before it was ready"));
        this._socket = null;
        for (const [, pending] of this._pending) {
          pending.reject(new ApiError("unreachable", "the connection to the gateway closed"));
        }
        this._pending.clear();
      };
      ws.addEventListener("close", closed);
    });
    this._socket.catch(() => { this._socket = null; });
    return this._socket;
  }

  _dispatch(frame) {
    const pending = this._pending.get(frame.id);
    if (!pending) return;
    const error = failure(frame, 0) || failure(frame.response, 0);
    if (error) {
      this._pending.delete(frame.id);
      pending.reject(error);
      return;
    }
    try {
      pending.onResponse(frame.response || {});
    } catch (e) {
      console.error(e);
    }
    if (frame.complete) {
      this._pending.delete(frame.id);
      pending.resolve();
    }
  }

  closeSocket() {
    const socket = this._socket;
    this._socket = null;
    if (socket) socket.then((ws) => ws.close(), () => {});
  }

  /**
   * Send one request over the WebSocket; onResponse(response) sees each streamed response.
   * Resolves when the last has come; rejects with ApiError (the gateway's or the service's).
   */
  async stream(service, request, { flow = this.flow, onResponse = () => {}, timeout = null } = {}) {
    const ws = await this._open();
    const id = `wb-${this._next++}`;
    const done = new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject, onResponse });
    });
    const frame = { id, workspace: this.workspace, service, flow, request };
    if (timeout) frame.timeout = timeout;
    ws.send(JSON.stringify(frame));
    return done;
  }
}

/** The parts of a config error the page can place beside a field: "invalid field 'x' of
 * type/key: problem" → {field: "x", problem}; otherwise {field: "", problem: message}. */
export function fieldOfError(message) {
  const found = /^invalid field '([^']+)' of [^:]+: (.*)$/s.exec(message || "");
  return found ? { field: found[1], problem: found[2] } : { field: "", problem: message || "" };
}
