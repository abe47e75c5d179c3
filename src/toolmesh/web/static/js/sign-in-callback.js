// The page an authorization server sends the browser back to (/api/v1/mcp-oauth/callback):
// it hands the code to the gateway as the person's own toolmesh identity, so a sign-in is
// kept only for the identity that started it (the mcp-tool service checks). The code leaves
// the address bar at once, and nothing from the URL is ever shown as HTML.

const TOKEN_KEY = "toolmesh.token";
const FIELDS = ["state", "code", "iss", "error"];

const params = new URLSearchParams(window.location.search);
window.history.replaceState(null, "", window.location.pathname);
const body = { operation: "login-finish" };
for (const name of FIELDS) {
  const value = params.get(name);
  if (value !== null) body[name] = value;
}

const status = document.getElementById("status");
const form = document.getElementById("token-form");

function say(text) {
  status.textContent = text;
}

async function finish(token) {
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch("/api/v1/flow/default/service/mcp-tool", {
      method: "POST", headers, body: JSON.stringify(body), credentials: "omit",
    });
  } catch (e) {
    say(`The gateway could not be reached: ${e}. Reload this page to try again.`);
    return;
  }
  let answer = null;
  try {
    answer = await response.json();
  } catch {
    answer = null;
  }
  if (response.status === 401) {
    form.hidden = false;
    say(token ? "That token was not accepted; try another." : "Who are you?");
    return;
  }
  const error = answer && typeof answer === "object" ? answer.error : null;
  if (!response.ok || (error && typeof error === "object")) {
    form.hidden = true;
    const message = error && error.message ? error.message : `HTTP ${response.status}`;
    say(`The sign-in was not kept: ${message}`);
    return;
  }
  let done = {};
  try {
    done = typeof answer.object === "string" ? JSON.parse(answer.object) : answer.object || {};
  } catch {
    done = {};
  }
  form.hidden = true;
  const who = done.per === "workspace" ? "the workspace" : "you";
  say(`Signed in: ${who} can now use ${done.item || "the MCP server"}. You can close this tab;`
      + " a dialog that waited for this goes on by itself.");
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  finish(document.getElementById("token").value.trim());
});

if (!body.state) {
  say("This page finishes a sign-in that toolmesh started; it was opened without one.");
} else {
  finish(sessionStorage.getItem(TOKEN_KEY) || "");
}
