// What waits for a person in the workspace, kept for the whole Workbench: the navigation
// shows its count, the Approvals page its cards, the Dialogs page which dialogs wait.
//
// Pushed, not polled: the store holds a `watch` of the `approvals` service on the tab's
// WebSocket (docs/approvals.md) — what waits now, then `{"asked": REQUEST}` as each call
// begins to wait and `{"answer": ANSWER}` as each is answered (here, elsewhere, or by its
// expiry) — and asks again when the gateway ends one shortly before its deadline
// (`"renew": true`). When the socket is lost (the gateway restarted), the watch is taken up
// again at the next sign of life: a page shown, the tab back in view, the network back.
// A gateway whose approvals service has no `watch` gets the list read at those moments, and
// after each answer given here.
//
// Listeners hear "change" (event.target: this store) and, while pushed, "answer" (detail:
// the ANSWER, with who gave it) before the change it makes.

/** The key of a request: its dialog and call (a call id is unique in its dialog). */
export function requestKey(request) {
  return `${request?.dialog}\n${request?.call}`;
}

/** A watch that ends sooner than this (milliseconds) is not renewed at once. */
const SHORTEST_WATCH_MS = 2000;

export class Waiting extends EventTarget {
  /** api: the Api (js/api.js); the store reads nothing until start(). */
  constructor(api) {
    super();
    this.api = api;
    /** the requests that wait, oldest first; null: not read (yet, or not allowed) */
    this.requests = null;
    /** why the last read failed ("" when it did not) */
    this.error = "";
    this.enabled = false;
    /** whether the list is pushed (a watch is held), else read at each sign of change */
    this.pushed = false;
    // answers given here: the service confirmed them, so they are not shown again even if
    // a list read at once still names them
    this._answered = new Set();
    this._reading = null;
    this._again = false;
    // each watch's number: the responses of a watch given up (sign-out, another workspace)
    // are not taken
    this._watch = 0;
    this._watching = false;
    this._noWatch = false;
    this._onView = () => {
      if (document.visibilityState === "visible") this.refresh();
    };
  }

  /** How many wait (0 while unknown). */
  get count() {
    return this.requests ? this.requests.length : 0;
  }

  /** The ids of the dialogs that wait for a person. */
  dialogs() {
    return new Set((this.requests || []).map((r) => String(r.dialog)));
  }

  /** Follow the workspace's list (enabled: the token may `approve`, which listing needs). */
  start(enabled) {
    this.stop();
    this.enabled = enabled;
    if (!enabled) return;
    window.addEventListener("focus", this._onView);
    window.addEventListener("online", this._onView);
    document.addEventListener("visibilitychange", this._onView);
    this.refresh();
  }

  /** Stop following (sign-out); the list is forgotten. */
  stop() {
    window.removeEventListener("focus", this._onView);
    window.removeEventListener("online", this._onView);
    document.removeEventListener("visibilitychange", this._onView);
    this.enabled = false;
    this._forget();
    this.dispatchEvent(new Event("change"));
  }

  /** The workspace changed: what waits there is another list. */
  reset() {
    this._forget();
    this.dispatchEvent(new Event("change"));
    this.refresh();
  }

  _forget() {
    this._watch += 1;  // the watch held (of the workspace before) is not taken any more
    this._watching = false;
    this.pushed = false;
    this.requests = null;
    this.error = "";
    this._answered.clear();
  }

  /** `request` was answered here: it no longer waits, whatever a list read at once says. */
  answered(request) {
    this._answered.add(requestKey(request));
    this._set(this.requests);
    if (!this._watching) this.refresh();
  }

  /**
   * Make sure the list is current: hold a watch if none is held (and the service has one),
   * else read the list. Reads asked for while one is under way become one more read after
   * it, never several. Resolves once the list has been read (or the watch has begun).
   */
  refresh() {
    if (!this.enabled || this._watching) return Promise.resolve();
    if (!this._noWatch) return this._hold();
    if (this._reading) {
      this._again = true;
      return this._reading;
    }
    this._reading = (async () => {
      do {
        this._again = false;
        await this._read();
      } while (this._again && this.enabled);
      this._reading = null;
    })();
    return this._reading;
  }

  /** Hold a watch: resolves at its first response (what waits now), or when it fails. */
  _hold() {
    const mine = ++this._watch;
    const began = performance.now();
    this._watching = true;
    let first;
    const begun = new Promise((resolve) => { first = resolve; });
    const current = () => mine === this._watch && this.enabled;
    this.api.stream("approvals", { operation: "watch" }, { flow: this.api.flow,
      onResponse: (r) => {
        if (!current()) return;
        this._take(r);
        first();
      } })
      .then(() => {
        if (!current()) return;
        this._watching = false;
        // ended before the gateway's deadline ("renew"): again — unless that deadline is so
        // short that watches would follow each other without a pause: then the list is read
        // at each sign of change instead
        if (performance.now() - began < SHORTEST_WATCH_MS) this._noWatch = true;
        this.refresh();
      }, (e) => {
        if (!current()) return;
        this._watching = false;
        this.pushed = false;
        if (e.type === "bad-request" && /operation/.test(e.message)) {
          this._noWatch = true;  // a gateway from before watches: read the list instead
          this.refresh();
        } else {
          // the socket is gone, or the service failed: taken up at the next sign of life
          this.error = e.message;
          this.dispatchEvent(new Event("change"));
        }
      })
      .finally(first);
    return begun;
  }

  /** One response of a watch. */
  _take(r) {
    if (Array.isArray(r.approvals)) {
      this.pushed = true;
      this.error = "";
      this._set(r.approvals.filter((x) => x && typeof x === "object"), true);
    } else if (r.asked && typeof r.asked === "object") {
      const key = requestKey(r.asked);
      const others = (this.requests || []).filter((x) => requestKey(x) !== key);
      this._set([...others, r.asked]);
    } else if (r.answer && typeof r.answer === "object") {
      const key = requestKey(r.answer);
      this._answered.delete(key);  // the service says so too: nothing more to hide
      // first the answer (a card shown says what was decided, by whom), then the list
      this.dispatchEvent(new CustomEvent("answer", { detail: r.answer }));
      this._set((this.requests || []).filter((x) => requestKey(x) !== key));
    }
  }

  /** The list is `listed` (without what was answered here); full: a whole list, after which
   * answers given here that it no longer names need no hiding. */
  _set(listed, full = false) {
    if (!listed) return;
    if (full) {
      const keys = new Set(listed.map(requestKey));
      for (const key of this._answered) if (!keys.has(key)) this._answered.delete(key);
    }
    this.requests = listed.filter((r) => !this._answered.has(requestKey(r)));
    this.dispatchEvent(new Event("change"));
  }

  async _read() {
    const workspace = this.api.workspace;
    let answer;
    try {
      answer = await this.api.call("approvals", { operation: "list" }, { flow: this.api.flow });
    } catch (e) {
      if (workspace !== this.api.workspace || !this.enabled) return;
      this.error = e.message;
      this.dispatchEvent(new Event("change"));
      return;
    }
    if (workspace !== this.api.workspace || !this.enabled) return;  // read for another one
    this.error = "";
    this._set((Array.isArray(answer.approvals) ? answer.approvals : [])
      .filter((r) => r && typeof r === "object"), true);
  }
}
