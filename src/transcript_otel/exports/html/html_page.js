/* transcript-otel HTML export: builds the run's timeline from the page's JSON chunks.
 *
 * Entries are sorted by time and grouped into the turns the writer placed them in (`t`:
 * the run's turn spans, as the header counts them); each tool call is paired with the entry
 * that answers it (`ans`, how long it took in `ms`: as the header's tools table counts), a
 * background call's launch notice shown in its card; each subagent source gets its own lane
 * (column) beside the main one. A turn is headed by its prompt; the tokens its entries count
 * (`tk`: the writer's rule, as devflow's) are summed in its summary line, usage reports' rows
 * start hidden, and what the run counts beyond all turns (`rest`) is a last line of its own.
 * Rows are rendered in batches as the reader scrolls. Only text is ever put in the page
 * (textContent), never markup.
 */
(() => {
  "use strict";
  const BATCH = 300;
  const CLAMP_CHARS = 3000;
  const CLAMP_LINES = 40;
  const PREVIEW = 160;
  const TOKEN_WORDS = [
    ["input", "in"], ["output", "out"], ["cached_input", "cached"],
    ["cache_write_input", "cache write"], ["reasoning_output", "reasoning"],
  ];
  const LABELS = {
    user_message: "user", assistant_message: "assistant", thinking: "thinking", tool_use: "tool call",
    tool_result: "tool result", system_event: "system", token_usage: "tokens", error: "error",
    unknown: "unknown", malformed: "malformed entry", "transcript.error": "capture error",
  };

  window.addEventListener("error", (event) => {
    const box = document.createElement("div");
    box.className = "failure";
    box.textContent = "The timeline could not be built: " + event.message;
    document.body.prepend(box);
  });
  const timeline = document.getElementById("timeline");
  const moreBar = document.getElementById("more");
  const toolbar = document.getElementById("toolbar");

  // -- small helpers ----------------------------------------------------------------------

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }
  function compactJson(value) {
    try { const text = JSON.stringify(value); return text === undefined ? String(value) : text; }
    catch (err) { return String(value); }
  }
  function prettyJson(value) {
    if (typeof value === "string") return value;
    try { const text = JSON.stringify(value, null, 2); return text === undefined ? String(value) : text; }
    catch (err) { return String(value); }
  }
  function clip(text, size) {
    const line = text.replace(/\s+/g, " ").trim();
    return line.length > size ? line.slice(0, size - 1) + "\u2026" : line;
  }
  function num(value) { return Number(value).toLocaleString("en-US"); }
  function seconds(total) {
    if (!isFinite(total)) return "";
    const sign = total < 0 ? "-" : "";
    total = Math.abs(total);
    if (total < 60) return sign + total.toFixed(3) + "s";
    const h = Math.floor(total / 3600);
    const m = Math.floor((total % 3600) / 60);
    const s = (total % 60).toFixed(1).padStart(4, "0");
    return sign + (h ? h + ":" + String(m).padStart(2, "0") : String(m)) + ":" + s;
  }
  function millis(ms) {
    if (ms === null || ms === undefined || !isFinite(ms)) return "";
    return ms < 1000 ? (ms < 10 ? ms.toFixed(1) : Math.round(ms)) + " ms" : seconds(ms / 1000);
  }
  function tokensText(tokens) {
    return TOKEN_WORDS.filter(([key]) => tokens[key] !== undefined)
      .map(([key, word]) => num(tokens[key]) + " " + word).join(" \u00b7 ");
  }
  function costText(cost) { return "$" + Number(cost.toFixed(6)).toString(); }

  // -- loading ----------------------------------------------------------------------------

  const meta = JSON.parse(document.getElementById("tx-meta").textContent);
  const ROLES = meta.roles;
  const SYM = meta.symbols;
  const entries = [];
  for (const chunk of document.querySelectorAll("script.tx-chunk")) {
    const list = JSON.parse(chunk.textContent);
    for (let j = 0; j < list.length; j++) entries.push(list[j]);
  }
  const data = document.getElementById("tx-data");
  if (data) data.remove(); // the chunks (and the no-script list) are not needed any more
  entries.sort((a, b) => (a.us - b.us) || (a.i - b.i));
  const t0 = meta.started_us !== null ? meta.started_us : (entries.length ? entries[0].us : 0);

  const roleOf = (e) => ROLES[e.k] || "system";
  const textOf = (e) => (e.x !== undefined && e.x !== null ? e.x : compactJson(e.d));
  function subtypeOf(e) {
    const d = e.d;
    if (!d || typeof d !== "object") return "";
    if (typeof d.subtype === "string") return d.subtype;
    const sdk = d.sdk_entry;
    return sdk && typeof sdk === "object" && typeof sdk.subtype === "string" ? sdk.subtype : "";
  }

  // -- tool calls: each tool_use with the tool_result of the same call id and source -----------

  const callsById = new Map();
  {
    const waiting = new Map();
    for (const e of entries) {
      const id = e.ans !== undefined ? e.ans : e.c;
      if (id === undefined || id === null) continue;
      const key = e.s + "\u0000" + id;
      if (e.k === "tool_use") {
        waiting.set(key, e);
        if (!callsById.has(e.c)) callsById.set(e.c, e);
        continue;
      }
      const use = waiting.get(key);
      if (!use) continue;
      e.call = use;
      if (e.ans !== undefined) {
        use.res = e; // the answer the writer paired, as the tools table counts it
        waiting.delete(key);
      } else if (e.k === "tool_result") {
        use.ack = e; // a background call's launch notice: its answer comes later
      }
    }
  }

  // -- turns and lanes ----------------------------------------------------------------------

  const turns = [];
  function newTurn(n) {
    return {
      n, opener: null, items: [], lanes: ["main"], laneOf: new Map([["main", 0]]), tokens: {},
      cost: 0, calls: 0, failed: 0, errors: 0, count: 0, first: null, last: null,
    };
  }
  function addTokens(into, tokens) {
    for (const key of Object.keys(tokens)) into[key] = (into[key] || 0) + tokens[key];
  }
  function addToTurn(turn, e) {
    turn.count++;
    if (turn.first === null) turn.first = e.us;
    turn.last = e.us;
    if (e.tk) addTokens(turn.tokens, e.tk);
    if (e.k === "token_usage" && e.cost) turn.cost += e.cost;
    if (e.k === "error" || e.k === "transcript.error") turn.errors++;
    if (e.s === "main") { // the turn's heading: its prompt, else what the harness said first
      const prompt = e.k === "user_message" && !(turn.opener && turn.opener.k === "user_message");
      if (prompt || (!turn.opener && e.k === "system_event" && subtypeOf(e) !== "turn_started")) turn.opener = e;
    }
    if (e.call && e.k === "tool_result") return; // shown in its call's card
    if (e.k === "system_event" && subtypeOf(e) === "turn_started") return; // the turn's own heading
    if (e.k === "tool_use" || e.k === "tool_result") {
      turn.calls++;
      if ((e.res && e.res.f) || e.f) turn.failed++;
    }
    if (!turn.laneOf.has(e.s)) {
      turn.laneOf.set(e.s, turn.lanes.length);
      turn.lanes.push(e.s);
    }
    turn.items.push(e);
  }
  {
    const byNumber = new Map();
    for (const e of entries) {
      const n = typeof e.t === "number" ? e.t : 0;
      let turn = byNumber.get(n);
      if (!turn) byNumber.set(n, (turn = newTurn(n)));
      addToTurn(turn, e);
    }
    turns.push(...[...byNumber.values()].sort((a, b) => a.n - b.n));
  }
  const opened = turns.filter((turn) => turn.n > 0).length;

  function laneLabel(source) {
    if (source === "main") return [SYM.assistant + " main", ""];
    const id = source.startsWith("subagent:") ? source.slice("subagent:".length) : source;
    const call = callsById.get(id);
    let name = "subagent";
    if (call) {
      const input = call.in && typeof call.in === "object" ? call.in : {};
      const kind = typeof input.subagent_type === "string" ? input.subagent_type : call.nm || "subagent";
      name = typeof input.description === "string" ? kind + " \u00b7 " + input.description : kind;
    }
    return [SYM.assistant + " " + name, id];
  }

  // -- the entries' cards -----------------------------------------------------------------

  let openTools = false;
  let openThinking = false;

  function textBlock(text, tag) {
    const box = el(tag || "div", "text");
    let cut = text.length > CLAMP_CHARS ? CLAMP_CHARS : -1;
    let at = -1;
    for (let line = 0; line < CLAMP_LINES; line++) {
      at = text.indexOf("\n", at + 1);
      if (at < 0) break;
    }
    if (at >= 0 && (cut < 0 || at < cut)) cut = at;
    if (cut < 0) {
      box.textContent = text;
      return box;
    }
    box.textContent = text.slice(0, cut) + "\u2026";
    const wrap = el("div", "clamped");
    const button = el("button", "more-text", "Show all " + num(text.length) + " characters");
    button.type = "button";
    button.addEventListener("click", () => {
      box.textContent = text;
      button.remove();
    });
    wrap.append(box, button);
    return wrap;
  }

  function thinkingBlock(text) {
    const details = el("details", "thinking inline");
    details.open = openThinking;
    const summary = el("summary");
    const line = el("div", "head");
    line.append(el("span", "label", "thinking"), el("span", "preview", clip(text, 120)));
    summary.append(line);
    details.append(summary, textBlock(text));
    return details;
  }

  function jsonDetails(label, value, preview) {
    const details = el("details", "json");
    details.append(el("summary", null, preview ? label + ": " + clip(preview, PREVIEW) : label));
    details.addEventListener("toggle", () => {
      if (details.open && details.childNodes.length === 1) details.append(el("pre", null, prettyJson(value)));
    });
    return details;
  }

  function head(symbol, label, e, ...extra) {
    const line = el("div", "head");
    line.append(el("span", "sym", symbol), el("span", "label", label), ...extra);
    if (e.n !== undefined && e.n !== null) line.append(el("span", "seq", "#" + e.n));
    return line;
  }

  function labelOf(e) {
    const label = LABELS[e.k] || e.k;
    const subtype = e.k === "system_event" ? subtypeOf(e) : "";
    return subtype ? label + " \u00b7 " + subtype : label;
  }

  function renderEntry(e) {
    if (e.k === "tool_use" || e.k === "tool_result") return renderTool(e);
    const role = roleOf(e);
    const card = el("div", "entry k-" + e.k + " role-" + role);
    card.dataset.kind = e.k;
    card.dataset.source = e.s;
    if (e.k === "thinking") {
      const details = el("details", "thinking");
      details.open = openThinking;
      const summary = el("summary");
      summary.append(head(SYM[role] || SYM.system, labelOf(e), e, el("span", "preview", clip(textOf(e), 120))));
      details.append(summary, textBlock(textOf(e)));
      card.append(details);
      return card;
    }
    if (e.k === "assistant_message" && typeof e.th === "string" && !e.x) {
      card.classList.add("k-thinking"); // nothing but thinking blocks
    }
    card.append(head(SYM[role] || SYM.system, labelOf(e), e));
    if (typeof e.th === "string") card.append(thinkingBlock(e.th)); // a message's thinking blocks
    const raw = e.r !== undefined && e.r !== null ? jsonDetails("raw", e.r) : null;
    if (e.x !== undefined && e.x !== null) card.append(textBlock(e.x));
    if (raw) card.append(raw); // JSON stays folded, never a card's face
    if (e.d !== undefined) card.append(jsonDetails("detail", e.d));
    return card;
  }

  function inputText(use) {
    if (use.in === undefined || use.in === null) return textOf(use);
    return typeof use.in === "string" ? use.in : compactJson(use.in);
  }

  // What a call does, in a line: its own words (`$ ls`, `add a.txt`) where they say more than
  // `name(arguments)`, else its arguments.
  function callText(use) {
    const named = (use.nm || "tool") + "(";
    if (typeof use.x === "string" && use.x && !use.x.startsWith(named)) return clip(use.x, PREVIEW);
    return "(" + clip(inputText(use), PREVIEW) + ")";
  }

  function renderTool(e) {
    const use = e.k === "tool_use" ? e : null;
    const res = use ? use.res : e;
    const failed = Boolean(res && res.f);
    const card = el("div", "entry tool k-" + e.k + (failed ? " failed" : ""));
    card.dataset.kind = e.k;
    card.dataset.source = e.s;
    if (e.c !== undefined) card.dataset.call = e.c;
    const details = el("details", "tool-call");
    details.open = openTools;
    const summary = el("summary");
    const call = el("span", "call");
    call.append(el("b", null, e.nm || "tool"));
    const does = use ? callText(use) : "result";
    call.append(does.startsWith("(") ? does : " " + does);
    const took = millis(res ? res.ms : null); // as the tools table counts it
    let badge;
    if (!res) badge = el("span", "badge pending", "no result");
    else badge = el("span", "badge " + (failed ? "failed" : "ok"), (failed ? "\u2717 failed" : "\u2713 ok") + (took ? " \u00b7 " + took : ""));
    summary.append(el("span", "marker"), el("span", "sym", SYM.tool), call, badge);
    if (e.n !== undefined && e.n !== null) summary.append(el("span", "seq", "#" + e.n));
    details.append(summary);

    const io = el("div", "io");
    if (use) {
      io.append(el("h4", null, "input"));
      io.append(textBlock(use.in === undefined || use.in === null ? textOf(use) : prettyJson(use.in), "pre"));
    }
    if (use && use.ack) {
      io.append(el("h4", null, "launched"));
      io.append(textBlock(textOf(use.ack), "pre"));
    }
    io.append(el("h4", null, "output"));
    if (res) io.append(textBlock(textOf(res), "pre"));
    else io.append(el("div", "facts-line", "No result was recorded for this call."));
    const facts = [];
    if (e.c !== undefined) facts.push("call " + e.c);
    if (use) facts.push("called " + relative(use.us));
    if (res) facts.push((use ? "answered " : "at ") + relative(res.us));
    if (took) facts.push("took " + took);
    if (res) facts.push(failed ? "failed" : "ok");
    io.append(el("div", "facts-line", facts.join(" \u00b7 ")));
    if (use) io.append(jsonDetails("tool_use detail", use.d));
    if (use && use.ack) io.append(jsonDetails("launch detail", use.ack.d));
    if (res) io.append(jsonDetails(res.k + " detail", res.d));
    details.append(io);
    card.append(details);
    return card;
  }

  function relative(us) { return "+" + seconds((us - t0) / 1e6); }

  // -- the timeline, rendered in batches --------------------------------------------------

  const hidden = new Set(["token_usage"]); // summed in each turn's line; a box shows them
  let query = "";
  let view = [];
  let total = 0; // rows from the first one shown to the end
  let matching = 0; // rows the filter lets through
  let rendered = 0;
  let cursor = 0;
  let rowCursor = 0;
  let currentRows = null;

  function haystack(e) {
    if (e.h === undefined) {
      let text = textOf(e);
      if (typeof e.th === "string") text += "\n" + e.th;
      if (e.nm) text += "\n" + e.nm;
      if (e.in !== undefined) text += "\n" + compactJson(e.in);
      if (e.res) text += "\n" + textOf(e.res);
      e.h = text.toLowerCase();
    }
    return e.h;
  }
  const visible = (e) => !hidden.has(e.k) && (!query || haystack(e).includes(query));

  function turnStats(turn) {
    const parts = [num(turn.count) + (turn.count === 1 ? " entry" : " entries")];
    if (turn.last !== null && turn.last > turn.first) parts.push(seconds((turn.last - turn.first) / 1e6));
    const tokens = tokensText(turn.tokens);
    if (tokens) parts.push("tokens " + tokens);
    if (turn.cost) parts.push(costText(turn.cost));
    if (turn.calls) parts.push(num(turn.calls) + " tool call" + (turn.calls === 1 ? "" : "s") + (turn.failed ? " (" + num(turn.failed) + " failed)" : ""));
    if (turn.errors) parts.push(num(turn.errors) + " error" + (turn.errors === 1 ? "" : "s"));
    return parts;
  }

  function turnName(turn) {
    if (turn.n) return "Turn " + turn.n;
    return opened ? "Before the first turn" : "Entries";
  }

  function openTurn(turn) {
    const section = el("details", "turn");
    section.open = true;
    section.id = "turn-" + turn.n;
    section.dataset.turn = String(turn.n);
    const summary = el("summary");
    summary.append(el("span", "turn-name", turnName(turn)));
    const opener = turn.opener;
    const openerText = !opener ? "" : (opener.k === "user_message" ? SYM.user : SYM.system) + " " + clip(textOf(opener), 240);
    summary.append(el("span", "turn-opener", openerText));
    const stats = el("span", "turn-stats");
    for (const part of turnStats(turn)) stats.append(el("span", null, part));
    summary.append(stats);
    section.append(summary);
    const rows = el("div", "rows" + (turn.lanes.length > 1 ? " multi" : ""));
    rows.style.setProperty("--lanes", String(turn.lanes.length));
    if (turn.lanes.length > 1) {
      const heads = el("div", "lane-heads");
      heads.append(el("div", "lane-head"));
      for (const source of turn.lanes) {
        const [name, id] = laneLabel(source);
        const laneHead = el("div", "lane-head", name);
        laneHead.dataset.lane = source;
        laneHead.title = source;
        if (id) laneHead.append(" ", el("span", "id", id));
        heads.append(laneHead);
      }
      rows.append(heads);
    }
    section.append(rows);
    timeline.append(section);
    return rows;
  }

  function renderRow(turn, e) {
    const row = el("div", "row");
    row.dataset.i = String(e.i);
    const time = el("div", "time", relative(e.us));
    time.title = e.ts || "";
    row.append(time);
    const lane = turn.laneOf.get(e.s) || 0;
    for (let j = 0; j < turn.lanes.length; j++) {
      const cell = el("div", j === lane ? "cell" : "cell empty");
      if (j === lane) {
        cell.dataset.lane = e.s;
        cell.append(renderEntry(e));
      }
      row.append(cell);
    }
    return row;
  }

  function renderMore(limit) {
    let done = 0;
    while (done < limit && cursor < view.length) {
      const part = view[cursor];
      if (rowCursor === 0) currentRows = openTurn(part.turn);
      const end = Math.min(part.rows.length, rowCursor + (limit - done));
      const batch = document.createDocumentFragment();
      for (; rowCursor < end; rowCursor++, done++) batch.append(renderRow(part.turn, part.rows[rowCursor]));
      currentRows.append(batch);
      if (rowCursor >= part.rows.length) {
        cursor++;
        rowCursor = 0;
      }
    }
    rendered += done;
    updateCounts();
  }

  function rebuild(from) {
    view = [];
    total = 0;
    const filtering = hidden.size > 0 || query !== "";
    for (const turn of turns) {
      const rows = filtering ? turn.items.filter(visible) : turn.items;
      if (rows.length) {
        view.push({ turn, rows });
        total += rows.length;
      }
    }
    matching = total;
    renderFrom(from || 0);
  }

  // Render the view from its part `start` on (a jump far ahead skips what comes before).
  function renderFrom(start) {
    rendered = 0;
    cursor = start;
    rowCursor = 0;
    currentRows = null;
    timeline.textContent = "";
    for (let j = 0; j < start; j++) total -= view[j].rows.length;
    if (start > 0) {
      const skipped = el("div", "skipped", num(start) + " earlier turn" + (start === 1 ? " is" : "s are") + " not shown. ");
      const back = el("button", null, "Show from the start");
      back.type = "button";
      back.addEventListener("click", () => {
        rebuild(0);
        window.scrollTo(0, 0);
      });
      skipped.append(back);
      timeline.append(skipped);
    }
    if (!view.length) {
      const none = entries.length ? "No entry matches the filter." : "No entries were recorded in this run.";
      timeline.append(el("p", "empty", none));
    }
    renderMore(BATCH);
    fill();
  }

  // -- the toolbar and the "more" bar ------------------------------------------------------

  const shownCount = el("span", "count");
  const moreInfo = el("span");
  function updateCounts() {
    const rows = turns.reduce((sum, turn) => sum + turn.items.length, 0);
    shownCount.textContent = matching === rows ? num(rows) + " rows" : num(matching) + " of " + num(rows) + " rows match";
    moreInfo.textContent = num(rendered) + " of " + num(total) + " rows shown";
    moreBar.hidden = rendered >= total;
  }

  function fill() {
    if (rendered >= total || moreBar.hidden) return;
    if (moreBar.getBoundingClientRect().top < window.innerHeight + 1200) {
      renderMore(BATCH);
      requestAnimationFrame(fill);
    }
  }

  function renderThrough(n) {
    const index = view.findIndex((part) => part.turn.n === n);
    if (index < 0) return;
    let between = 0;
    for (let j = cursor; j < index; j++) between += view[j].rows.length;
    if (between > BATCH * 10) {
      rebuild(index); // far ahead: start the page at that turn
    } else {
      while (cursor < index) renderMore(BATCH);
      if (cursor === index && rowCursor === 0) renderMore(BATCH);
    }
    const section = document.getElementById("turn-" + n);
    if (section) {
      section.open = true;
      section.scrollIntoView({ block: "start" });
    }
  }

  function toggleAll(selector, open) {
    for (const details of timeline.querySelectorAll(selector)) details.open = open;
  }

  function buildToolbar() {
    const search = el("input");
    search.type = "search";
    search.placeholder = "Filter: text, tool name, input\u2026";
    search.setAttribute("aria-label", "Filter entries");
    let timer = 0;
    search.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        query = search.value.trim().toLowerCase();
        rebuild(0);
      }, 200);
    });
    toolbar.append(search);

    const kinds = new Map();
    for (const turn of turns) for (const e of turn.items) kinds.set(e.k, (kinds.get(e.k) || 0) + 1);
    const types = el("span", "types");
    for (const [kind, count] of kinds) {
      const label = el("label", null, (LABELS[kind] || kind) + " " + num(count));
      label.dataset.kind = kind;
      const box = el("input");
      box.type = "checkbox";
      box.checked = !hidden.has(kind);
      label.classList.toggle("off", !box.checked);
      box.addEventListener("change", () => {
        if (box.checked) hidden.delete(kind); else hidden.add(kind);
        label.classList.toggle("off", !box.checked);
        rebuild(0);
      });
      label.prepend(box);
      types.append(label);
    }
    toolbar.append(types);

    if (opened > 1) {
      const jump = el("select");
      jump.setAttribute("aria-label", "Go to turn");
      jump.append(el("option", null, "Go to turn\u2026"));
      for (const turn of turns) {
        const option = el("option", null, turnName(turn) + (turn.opener ? ": " + clip(textOf(turn.opener), 60) : ""));
        option.value = String(turn.n);
        jump.append(option);
      }
      jump.addEventListener("change", () => {
        if (jump.value !== "") renderThrough(Number(jump.value));
        jump.selectedIndex = 0;
      });
      toolbar.append(jump);
    }

    const tools = el("button", null, "Expand tool calls");
    tools.type = "button";
    tools.addEventListener("click", () => {
      openTools = !openTools;
      toggleAll("details.tool-call", openTools);
      tools.textContent = openTools ? "Collapse tool calls" : "Expand tool calls";
    });
    const thinking = el("button", null, "Show thinking");
    thinking.type = "button";
    thinking.addEventListener("click", () => {
      openThinking = !openThinking;
      toggleAll("details.thinking", openThinking);
      thinking.textContent = openThinking ? "Hide thinking" : "Show thinking";
    });
    toolbar.append(tools, thinking, shownCount);
    toolbar.hidden = false;

    const more = el("button", null, "Show more");
    more.type = "button";
    more.addEventListener("click", () => renderMore(BATCH * 5));
    const all = el("button", null, "Show all");
    all.type = "button";
    all.addEventListener("click", () => renderMore(Infinity));
    moreBar.append(moreInfo, more, all);
    if ("IntersectionObserver" in window) {
      new IntersectionObserver((seen) => {
        if (seen.some((item) => item.isIntersecting)) fill();
      }, { rootMargin: "1200px 0px" }).observe(moreBar);
    }
  }

  // -- start ----------------------------------------------------------------------------

  buildToolbar();
  rebuild(0);
  if (meta.rest && Object.keys(meta.rest).length) { // after the rows, which re-rendering replaces
    moreBar.after(el("p", "usage-rest", "In the session's total, on no turn: tokens " + tokensText(meta.rest)));
  }
  document.documentElement.dataset.ready = "true";
})();
