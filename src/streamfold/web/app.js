// A small reader of the Vercel AI SDK UI message stream (v1), in plain JS: fetch, a
// ReadableStream, SSE parsing, and a renderer per chunk type. No build step, no library.

const $ = (selector, root = document) => root.querySelector(selector);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function safeUrl(url) {
  // Recordings are data: only web links and images embedded as data URLs are followed.
  return /^(https?:|data:image\/)/i.test(url) ? url : null;
}

function streamfoldMeta(chunk) {
  return (chunk.providerMetadata && chunk.providerMetadata.streamfold) || {};
}

// --- SSE ----------------------------------------------------------------------------

export async function* sseData(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = lines.pop(); // the last line may be incomplete
    for (const line of lines) {
      if (line === "") {
        if (data.length) yield data.join("\n");
        data = [];
      } else if (line.startsWith("data:")) {
        data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
      } // comments (":") and other fields are not used by this protocol
    }
  }
  if (data.length) yield data.join("\n");
}

// --- a small, safe Markdown renderer (DOM nodes only, never innerHTML) ---------------------

const INLINE = /(`+)([^`]+?)\1|\*\*([^*]+?)\*\*|__([^_]+?)__|\*([^*\s][^*]*?)\*|_([^_\s][^_]*?)_|\[([^\]]+)\]\(([^)\s]+)\)/g;

function inline(text) {
  const out = document.createDocumentFragment();
  let at = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > at) out.append(text.slice(at, m.index));
    if (m[2] !== undefined) out.append(el("code", null, m[2]));
    else if (m[3] !== undefined || m[4] !== undefined) {
      const strong = el("strong");
      strong.append(inline(m[3] ?? m[4]));
      out.append(strong);
    } else if (m[5] !== undefined || m[6] !== undefined) {
      const em = el("em");
      em.append(inline(m[5] ?? m[6]));
      out.append(em);
    } else {
      const url = safeUrl(m[8]);
      const link = el(url ? "a" : "span", null, m[7]);
      if (url) {
        link.href = url;
        link.target = "_blank";
        link.rel = "noopener noreferrer";
      }
      out.append(link);
    }
    at = m.index + m[0].length;
  }
  if (at < text.length) out.append(text.slice(at));
  return out;
}

function cells(line) {
  return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
}

function markdown(text) {
  const root = document.createDocumentFragment();
  const lines = text.split("\n");
  let i = 0;
  const isTableRule = (l) => /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/.test(l);
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) { i++; continue; }
    if ((m = line.match(/^\s*(```|~~~)/))) {
      const fence = m[1];
      const body = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence); i++) body.push(lines[i]);
      i++;
      root.append(el("pre", "code", body.join("\n")));
    } else if ((m = line.match(/^(#{1,6})\s+(.*)$/))) {
      const h = el(`h${Math.min(m[1].length + 2, 6)}`);
      h.append(inline(m[2]));
      root.append(h);
      i++;
    } else if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      root.append(el("hr"));
      i++;
    } else if (line.includes("|") && i + 1 < lines.length && isTableRule(lines[i + 1])) {
      const table = el("table");
      const head = el("tr");
      for (const c of cells(line)) { const th = el("th"); th.append(inline(c)); head.append(th); }
      table.append(head);
      for (i += 2; i < lines.length && lines[i].includes("|") && lines[i].trim(); i++) {
        const row = el("tr");
        for (const c of cells(lines[i])) { const td = el("td"); td.append(inline(c)); row.append(td); }
        table.append(row);
      }
      const wrap = el("div", "table");
      wrap.append(table);
      root.append(wrap);
    } else if ((m = line.match(/^\s*([-*+]|\d+[.)])\s+/))) {
      const ordered = /\d/.test(m[1]);
      const list = el(ordered ? "ol" : "ul");
      while (i < lines.length && (m = lines[i].match(/^\s*([-*+]|\d+[.)])\s+(.*)$/))) {
        const item = el("li");
        item.append(inline(m[2]));
        list.append(item);
        i++;
      }
      root.append(list);
    } else if (line.startsWith(">")) {
      const quote = el("blockquote");
      const body = [];
      for (; i < lines.length && lines[i].startsWith(">"); i++) body.push(lines[i].replace(/^>\s?/, ""));
      quote.append(markdown(body.join("\n")));
      root.append(quote);
    } else {
      const p = el("p");
      const body = [];
      const startsBlock = (n) => /^(#{1,6}\s|\s*```|\s*[-*+]\s|\s*\d+[.)]\s|>)/.test(lines[n])
        || (lines[n].includes("|") && n + 1 < lines.length && isTableRule(lines[n + 1]));
      for (; i < lines.length && lines[i].trim() && !startsBlock(i); i++) body.push(lines[i]);
      if (!body.length) { body.push(lines[i]); i++; }
      body.forEach((l, n) => { if (n) p.append(el("br")); p.append(inline(l)); });
      root.append(p);
    }
  }
  return root;
}

// --- rendering ------------------------------------------------------------------------

// The text with each cited piece followed by the numbers of its sources ("[1][2]"), as
// the sources list numbers them. `citations`: [{start, end, sourceIds}], offsets counted
// in code points (as the server counts them), not UTF-16 units.
function withMarkers(text, citations, numbers) {
  const chars = Array.from(text);
  const places = citations
    .filter((c) => Number.isInteger(c.end) && c.end >= 0 && c.end <= chars.length)
    .sort((a, b) => b.end - a.end);
  for (const place of places) {
    const ids = Array.isArray(place.sourceIds) ? place.sourceIds : [];
    const marks = ids.map((id) => numbers.get(id)).filter(Boolean).map((n) => `[${n}]`);
    if (marks.length) chars.splice(place.end, 0, marks.join(""));
  }
  return chars.join("");
}

export class MessageView {
  constructor(root, finish, counter) {
    this.root = root;
    this.finish = finish;
    this.counter = counter;
    this.parts = new Map(); // part id or toolCallId -> {node, body, text}
    this.sources = null;
    this.sourceNumbers = new Map(); // sourceId -> its number in the sources list
    this.chunks = 0;
    this.steps = 0;
    this.started = performance.now();
    this.ended = null; // the `finish` chunk, once it came
    this.errored = false;
    this.aborted = false; // an `abort` chunk came: the turn was stopped
    root.replaceChildren();
    finish.hidden = true;
    finish.replaceChildren();
  }

  handle(chunk) {
    this.chunks += 1;
    this.counter.textContent = `${this.chunks} chunks · ${((performance.now() - this.started) / 1000).toFixed(1)} s`;
    const handler = this[`on_${chunk.type.replaceAll("-", "_")}`];
    if (handler) handler.call(this, chunk);
    else if (chunk.type.startsWith("data-")) this.onData(chunk);
  }

  add(node) {
    // Parts go before the sources list, which stays last.
    if (this.sources) this.root.insertBefore(node, this.sources.parentNode);
    else this.root.append(node);
    return node;
  }

  on_start_step() {
    this.steps += 1;
    if (this.steps > 1) this.add(el("hr", "step"));
  }

  // text
  on_text_start(chunk) {
    const meta = streamfoldMeta(chunk);
    const node = el("div", "part text");
    node.dataset.state = "streaming";
    if (meta.utterance) {
      node.classList.add(meta.utterance);
      node.append(el("span", "badge", meta.utterance));
    }
    const body = el("div", "body");
    const text = document.createTextNode("");
    body.append(text, el("span", "caret"));
    node.append(body);
    this.parts.set(chunk.id, { node, body, text });
    this.add(node);
  }

  on_text_delta(chunk) {
    const part = this.parts.get(chunk.id);
    if (part) part.text.appendData(chunk.delta);
  }

  on_text_end(chunk) {
    const part = this.parts.get(chunk.id);
    if (!part) return;
    part.node.dataset.state = "done";
    // The raw text stays on the element (tests read it); the page shows it rendered.
    part.node.streamfoldText = part.text.data;
    const meta = streamfoldMeta(chunk);
    // Joined text parts (a cited answer): each cited piece marked where it ends.
    const shown = Array.isArray(meta.citations)
      ? withMarkers(part.text.data, meta.citations, this.sourceNumbers)
      : part.text.data;
    part.body.replaceChildren(markdown(shown));
    part.body.classList.add("md");
    if (meta.utterance && !$(".badge", part.node)) {
      part.node.classList.add(meta.utterance);
      part.node.prepend(el("span", "badge", meta.utterance));
    }
  }

  // reasoning
  on_reasoning_start(chunk) {
    const node = el("details", "part reasoning");
    node.dataset.state = "streaming";
    node.open = true;
    const summary = el("summary", null);
    summary.append(el("span", "label", "Thinking…"));
    const body = el("div", "body");
    const text = document.createTextNode("");
    body.append(text);
    node.append(summary, body);
    this.parts.set(chunk.id, { node, body, text, summary });
    this.add(node);
  }

  on_reasoning_delta(chunk) {
    const part = this.parts.get(chunk.id);
    if (part) part.text.appendData(chunk.delta);
  }

  on_reasoning_end(chunk) {
    const part = this.parts.get(chunk.id);
    if (!part) return;
    part.node.dataset.state = "done";
    const words = part.text.data.trim() ? part.text.data.trim().split(/\s+/).length : 0;
    const meta = streamfoldMeta(chunk);
    const label = words ? `Thought · ${words} words` : "Thought (hidden)";
    part.summary.replaceChildren(el("span", "label", label));
    if (meta.signature) part.summary.append(el("span", "badge", "signed"));
    if (meta.encrypted_content) part.summary.append(el("span", "badge", "encrypted"));
    part.node.open = false;
  }

  // tool calls
  on_tool_input_start(chunk) {
    const node = el("div", "part tool");
    node.dataset.state = "streaming";
    const head = el("div", "tool-head");
    head.append(el("span", "tool-icon", "ƒ"), el("span", "tool-name", chunk.toolName),
      el("span", "tool-id", chunk.toolCallId));
    if (chunk.providerExecuted) {
      // A tool the provider ran itself (web search, code execution): its result follows.
      node.classList.add("provider");
      head.append(el("span", "badge", "run by the provider"));
    }
    const args = el("pre", "args");
    const text = document.createTextNode("");
    args.append(text);
    node.append(head, args);
    this.parts.set(`tool:${chunk.toolCallId}`, { node, body: args, text });
    this.add(node);
  }

  on_tool_input_delta(chunk) {
    const part = this.parts.get(`tool:${chunk.toolCallId}`);
    if (part) part.text.appendData(chunk.inputTextDelta);
  }

  on_tool_input_available(chunk) {
    let part = this.parts.get(`tool:${chunk.toolCallId}`);
    if (!part) {
      this.on_tool_input_start(chunk);
      part = this.parts.get(`tool:${chunk.toolCallId}`);
    }
    part.node.dataset.state = "done";
    part.text.data = JSON.stringify(chunk.input, null, 2);
  }

  on_tool_input_error(chunk) {
    let part = this.parts.get(`tool:${chunk.toolCallId}`);
    if (!part) {
      this.on_tool_input_start(chunk);
      part = this.parts.get(`tool:${chunk.toolCallId}`);
    }
    part.node.dataset.state = "error";
    part.text.data = typeof chunk.input === "string" ? chunk.input : JSON.stringify(chunk.input);
    part.node.append(el("div", "tool-error", chunk.errorText));
  }

  // the app's tool results (an agent loop): shown under the call they answer
  toolResult(chunk, state, text) {
    const part = this.parts.get(`tool:${chunk.toolCallId}`);
    if (!part) return;
    const box = el("div", `tool-output ${state}`);
    box.append(el("span", "badge", state === "done" ? "result" : state), el("pre", "args", text));
    part.node.append(box);
    part.node.dataset.result = state;
  }

  on_tool_output_available(chunk) {
    const text = typeof chunk.output === "string" ? chunk.output : JSON.stringify(chunk.output, null, 2);
    this.toolResult(chunk, "done", text);
  }

  on_tool_output_error(chunk) {
    this.toolResult(chunk, "error", chunk.errorText);
  }

  on_tool_output_denied(chunk) {
    this.toolResult(chunk, "denied", "the user did not approve this call");
  }

  // sources and files
  sourceList() {
    if (!this.sources) {
      const box = el("section", "sources");
      box.append(el("h3", null, "Sources"));
      this.sources = el("ol", null);
      box.append(this.sources);
      this.root.append(box);
    }
    return this.sources;
  }

  numberSource(chunk) {
    if (!this.sourceNumbers.has(chunk.sourceId)) {
      this.sourceNumbers.set(chunk.sourceId, this.sourceNumbers.size + 1);
    }
  }

  on_source_url(chunk) {
    this.numberSource(chunk);
    const item = el("li", "source");
    const url = safeUrl(chunk.url);
    const link = el(url ? "a" : "span", null, chunk.title || chunk.url);
    if (url) {
      link.href = url;
      link.target = "_blank";
      link.rel = "noopener noreferrer";
    }
    item.append(link);
    try {
      item.append(el("span", "host", new URL(chunk.url).hostname));
    } catch { /* not a URL: the title says enough */ }
    this.sourceList().append(item);
  }

  on_source_document(chunk) {
    this.numberSource(chunk);
    const item = el("li", "source document");
    item.append(el("span", null, chunk.title), el("span", "host", chunk.mediaType));
    this.sourceList().append(item);
  }

  on_file(chunk) {
    const node = el("div", "part file");
    node.dataset.state = "done";
    const url = safeUrl(chunk.url);
    if (url && chunk.mediaType.startsWith("image/")) {
      const img = el("img", null);
      img.src = url;
      img.alt = "image from the model";
      node.append(img);
    } else {
      node.append(el("span", "badge", chunk.mediaType), el("span", null, chunk.url.slice(0, 80)));
    }
    this.add(node);
  }

  // The structured output (fold(..., output=...)): one data part, replaced as it grows,
  // as the AI SDK's reader replaces a data part of the same type and id.
  on_data_output(chunk) {
    let part = this.parts.get(`data-output:${chunk.id}`);
    if (!part) {
      const node = el("div", "part output");
      const head = el("div", "output-head");
      const state = el("span", "badge", "typed output");
      const count = el("span", "label", "");
      head.append(state, count);
      const body = el("pre", "args");
      node.append(head, body);
      part = { node, body, count, updates: 0 };
      this.parts.set(`data-output:${chunk.id}`, part);
      this.add(node);
    }
    const data = chunk.data || {};
    part.updates += 1;
    part.node.dataset.updates = String(part.updates);
    part.node.dataset.state =
      data.state === "complete" ? "done" : data.state === "failed" ? "error" : "streaming";
    // The value stays on the element (tests read it); the page shows it indented.
    part.node.streamfoldValue = data.value;
    part.body.textContent = data.state === "failed"
      ? String(data.error)
      : JSON.stringify(data.value, null, 2);
    part.count.textContent = `${data.state} · update ${part.updates}`;
  }

  onData(chunk) {
    const node = el("details", "part block");
    node.dataset.state = "done";
    const kind = (chunk.data && chunk.data.type) || chunk.type.slice(5);
    const summary = el("summary", null);
    summary.append(el("span", "badge", "provider block"), el("span", "label", kind));
    const name = chunk.data && (chunk.data.name || (chunk.data.block && chunk.data.block.name));
    if (name) summary.append(el("span", "tool-id", name));
    node.append(summary, el("pre", "args", JSON.stringify(chunk.data, null, 2)));
    this.add(node);
  }

  // the end
  on_error(chunk) {
    this.errored = true;
    this.add(el("div", "part error", chunk.errorText));
  }

  // A stopped turn ends with `abort` instead of `finish` (useChat: stopped, not failed).
  on_abort() {
    this.aborted = true;
  }

  on_finish(chunk) {
    this.ended = chunk;
    const meta = chunk.messageMetadata || {};
    const items = [];
    if (meta.status && meta.status !== "complete") items.push(["status", meta.status]);
    if (chunk.finishReason) items.push(["finish", chunk.finishReason]);
    if (meta.rawStopReason) items.push(["stop", meta.rawStopReason]);
    if (meta.usage) {
      items.push(["in", meta.usage.inputTokens ?? "–"], ["out", meta.usage.outputTokens ?? "–"]);
      if (meta.usage.reasoningTokens) items.push(["reasoning", meta.usage.reasoningTokens]);
      if (meta.usage.cacheReadTokens) items.push(["cache read", meta.usage.cacheReadTokens]);
    }
    const timing = meta.timing || {};
    if (timing.timeToFirstToken != null) {
      items.push(["first token", `${timing.timeToFirstToken.toFixed(2)} s`]);
    }
    if (timing.outputTokensPerSecond != null) {
      items.push(["tokens/s", timing.outputTokensPerSecond.toFixed(1)]);
    }
    if (meta.model) items.push(["model", meta.model]);
    if (meta.provider) items.push(["provider", meta.provider]);
    this.finish.replaceChildren(...items.map(([k, v]) => {
      const item = el("span", "kv");
      item.append(el("span", "k", k), el("span", "v", String(v)));
      return item;
    }));
    this.finish.hidden = items.length === 0;
  }

  // How the message ended, as [state, label] for setStatus: "done" only for one that
  // finished whole. A stream cut before its `finish`, a message whose status is not
  // complete (a producer that died: incomplete) or an error is shown as such; a stopped
  // turn (its `abort`) or message (cancelled: a Stop, or its worker shutting down) as
  // stopped.
  outcome() {
    const status = this.ended?.messageMetadata?.status;
    if (this.errored || status === "error" || this.ended?.finishReason === "error") {
      return ["error", "ended with an error"];
    }
    if (this.aborted || status === "cancelled") return ["stopped", "stopped"];
    if (!this.ended) return ["incomplete", "incomplete: the stream was cut"];
    if (status && status !== "complete") return ["incomplete", status];
    return ["done", "done"];
  }
}

// --- the page -------------------------------------------------------------------------

const status = $("#status");
let current = null;

export function setStatus(state, label) {
  status.dataset.state = state;
  $(".label", status).textContent = label;
  document.body.dataset.stream = state;
}

async function loadRecordings() {
  const select = $("#recording");
  const response = await fetch("/ui-recordings");
  const { recordings } = await response.json();
  const groups = new Map();
  for (const r of recordings) {
    if (!groups.has(r.provider)) groups.set(r.provider, []);
    groups.get(r.provider).push(r);
  }
  for (const [provider, list] of groups) {
    const group = el("optgroup");
    group.label = provider;
    for (const r of list) {
      const option = el("option", null, r.name);
      option.value = r.name;
      group.append(option);
    }
    select.append(group);
  }
  const wanted = new URLSearchParams(location.search).get("recording");
  if (wanted && recordings.some((r) => r.name === wanted)) select.value = wanted;
  const params = new URLSearchParams(location.search);
  if (params.get("output") === "json") $("#output").checked = true;
  if (params.get("output_tool")) $("#output-tool").value = params.get("output_tool");
  const speed = params.get("speed");
  if (speed && [...$("#speed").options].some((o) => o.value === speed)) $("#speed").value = speed;
}

async function replay(recording, speed) {
  if (current) current.abort();
  const controller = new AbortController();
  current = controller;
  const view = new MessageView($("#message"), $("#finish"), $("#counter"));
  setStatus("streaming", "streaming…");
  try {
    let url = `/ui-stream?recording=${encodeURIComponent(recording)}&speed=${speed}`;
    if ($("#output").checked) {
      url += "&output=json";
      const tool = $("#output-tool").value.trim();
      if (tool) url += `&output_tool=${encodeURIComponent(tool)}`;
    }
    const response = await fetch(url, { signal: controller.signal });
    if (!response.ok) throw new Error((await response.json()).error?.message ?? response.statusText);
    if (response.headers.get("x-vercel-ai-ui-message-stream") !== "v1") {
      throw new Error("the server did not answer with a UI message stream (v1)");
    }
    for await (const data of sseData(response.body)) {
      if (data === "[DONE]") break;
      view.handle(JSON.parse(data));
    }
    if (current === controller) setStatus(...view.outcome());
  } catch (error) {
    if (controller.signal.aborted) return;
    view.on_error({ errorText: String(error.message ?? error) });
    setStatus("error", "failed");
  }
}

// Another module (relay.js) may take a replay over: it returns true when it did.
export const hooks = { submit: null };

$("#controls").addEventListener("submit", (event) => {
  event.preventDefault();
  if (hooks.submit && hooks.submit($("#recording").value, $("#speed").value)) return;
  replay($("#recording").value, $("#speed").value);
});

loadRecordings().then(() => {
  if (new URLSearchParams(location.search).has("autoplay")) $("#controls").requestSubmit();
});
