// /workbench/sign-in/go.html#<address, URL-encoded>: the Workbench opens this page in a new
// tab to send the person to a sign-in page (js/links.js says why through a page of our own:
// the new tab gets a copy of the Workbench tab's token, which the gateway's callback page
// needs). The address comes in the fragment, so it never reaches a server or its log; only an
// http(s) address is followed, and its host is shown first.
//
// Opened by the Workbench (an opener of this origin), the tab goes on at once; opened any
// other way — a link someone sent — it waits for a click, so the gateway's address cannot
// be used to send people silently to another site.

import { webAddress } from "./links.js";

const status = document.getElementById("status");
const host = document.getElementById("host");
const go = document.getElementById("go");

function openedByTheWorkbench() {
  try {
    return Boolean(window.opener) && window.opener.location.origin === window.location.origin;
  } catch {
    return false;  // an opener of another origin: its location cannot be read
  }
}

function leave(url) {
  // the next site must not reach back into the Workbench's tab (COOP severs it too)
  window.opener = null;
  window.location.replace(url.href);
}

/** Show where the fragment points; go there at once only when `goOn` (first load, opened
 * by the Workbench). A later change of the fragment (same page, no reload) is shown anew. */
function show(goOn) {
  let text = "";
  try {
    text = decodeURIComponent(window.location.hash.slice(1));
  } catch {
    text = "";
  }
  const target = webAddress(text);
  go.hidden = true;
  go.onclick = null;
  if (target === null) {
    document.title = "toolmesh — not going anywhere";
    status.textContent = text
      ? "This page was given an address that is not a web page (only http: and https: "
        + "addresses are opened), so it stays here. You can close this tab."
      : "This page sends you on to a sign-in page, but it was opened without one. You can "
        + "close this tab.";
    status.classList.add("error");
    host.hidden = true;
    return;
  }
  document.title = `toolmesh — going to ${target.host}`;
  status.textContent = `You are going to sign in at ${target.host}`;
  status.classList.remove("error");
  host.textContent = target.href;
  host.hidden = false;
  if (goOn) {
    leave(target);
    return;
  }
  go.textContent = `Continue to ${target.host}`;
  go.onclick = () => leave(target);
  go.hidden = false;
  go.focus();
}

window.addEventListener("hashchange", () => show(false));
show(openedByTheWorkbench());
