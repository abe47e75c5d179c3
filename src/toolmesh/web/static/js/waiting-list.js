// The cards of what waits for a person (js/approvals.js), as the workspace's list has them
// (js/waiting.js): on the Approvals page all of them, on a dialog's page its own. The section
// follows the list as it changes: new requests get a card; one answered (here, or elsewhere
// while the list is pushed) stays, spent, saying what happened and by whom; one gone without
// a word (its dialog ended) is taken away.
// A card still waiting is never rebuilt (a reason being typed survives a read).

import { overRest, requestCard } from "./approvals.js";
import { append, h, joined, status } from "./dom.js";
import { requestKey } from "./waiting.js";

/**
 * The section. ctx: the page's ({api, waiting, signal}); dialog: only this dialog's requests;
 * title: the section's heading.
 */
export function waitingList(ctx, { dialog = "", title = "Waiting for an answer" } = {}) {
  const { api, waiting, signal } = ctx;
  const list = h("div", { class: "requests" });
  const empty = h("p", { class: "muted" }, dialog ? "No call of this dialog waits for an answer."
    : "No call waits for an answer in this workspace.");
  const problem = status();
  const note = status();
  /** key -> card shown */
  const cards = new Map();

  const card = (r) => requestCard(r, {
    send: overRest(api),
    detail: dialog ? null : h("p", { class: "muted" }, joined(", ",
      h("span", {}, "Dialog ", h("a", { href: `#/dialogs/${encodeURIComponent(String(r.dialog))}` },
        String(r.dialog))),
      r.step != null && `step ${r.step}`,
      typeof r.user === "string" && r.user && `asked by ${r.user}`)),
    onSettled: (text, kind, gone) => {
      note.set(text, kind);
      if (gone) waiting.answered(r);
      else waiting.refresh();
    },
  });

  const show = () => {
    const requests = (waiting.requests || []).filter((r) => !dialog || String(r.dialog) === dialog);
    const keys = new Set(requests.map(requestKey));
    for (const [key, shown] of cards) {
      if (!keys.has(key) && !shown.answered && !shown.sending) {
        shown.remove();
        cards.delete(key);
      }
    }
    for (const r of requests) {
      const key = requestKey(r);
      if (cards.has(key)) continue;
      const made = card(r);
      cards.set(key, made);
      append(list, made);
    }
    empty.hidden = requests.length > 0;
    problem.set(waiting.error ? `Cannot list the calls that wait: ${waiting.error}` : "",
      waiting.error ? "error" : "");
    problem.hidden = !waiting.error;
  };
  waiting.addEventListener("change", show, { signal });
  // answered elsewhere (or expired): the card stays, spent, saying what and by whom
  waiting.addEventListener("answer", (event) => {
    cards.get(requestKey(event.detail))?.told(event.detail);
  }, { signal });
  show();
  const heading = `waiting-title-${dialog ? "dialog" : "all"}`;
  return h("section", { class: "panel waiting", "aria-labelledby": heading },
    h("h2", { id: heading }, title), problem, list, empty, note);
}

/** The same, for a token without `approve`: why it shows nothing. */
export function cannotList() {
  return h("section", { class: "panel" }, h("p", { class: "muted" },
    "Listing and answering what waits needs the approve capability, which this token lacks."));
}
