// Approvals: what waits for a person in this workspace — calls whose tool's policy asks, and
// MCP servers' questions (docs/approvals.md) — each a card answerable here by anyone with
// `approve`, whether or not they were in the chat, and after the chat's connection is gone.
// The list follows the workspace as it changes (js/waiting.js), as does the count beside
// "Approvals" in the navigation.

import { h } from "../dom.js";
import { cannotList, waitingList } from "../waiting-list.js";

export async function render(ctx) {
  const { session } = ctx;
  return h("div", { class: "approvals-page" },
    h("h1", {}, "Approvals"),
    h("p", { class: "muted" }, "Calls that wait for a person to approve or deny them, and "
      + "questions MCP servers ask during a call. Each names its dialog; the list follows "
      + "the workspace as requests come and are answered."),
    session.can("approve") ? waitingList(ctx) : cannotList());
}
