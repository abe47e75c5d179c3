// Opening a page that an MCP server or its authorization server names (a sign-in, a consent)
// in a new tab. Always through the Workbench's own sign-in/go.html: the token lives in this
// tab's sessionStorage, and a tab that window.open() starts at a page of the same origin gets
// a copy of it (opened with noopener it would start empty). The authorization server later
// sends that tab back to the gateway's sign-in callback page, which finishes the sign-in as
// the identity whose token it finds there. go.html drops its opener, then moves itself on.

/** The page that sends a new tab on (the address goes in its fragment, never to a server). */
export const GO_PAGE = "/workbench/sign-in/go.html";

/** `text` as a URL if it is an http(s) address without a user name or password in it (a
 * "https://trusted.example@other.example/" would show one host and go to another); else
 * null. */
export function webAddress(text) {
  let url;
  try {
    url = new URL(String(text ?? ""));
  } catch {
    return null;
  }
  if (!["http:", "https:"].includes(url.protocol) || !url.host) return null;
  if (url.username || url.password) return null;
  return url;
}

/** Open `url` (from webAddress) in a new tab through go.html. False: the browser blocked it. */
export function openThroughGo(url) {
  // no "noopener": that would leave the new tab without this tab's sessionStorage
  const tab = window.open(`${GO_PAGE}#${encodeURIComponent(url.href)}`, "_blank");
  return tab !== null && tab !== undefined;
}
