// Resumable replays through the Redis relay (streamfold.relay): the replay's stream id goes
// in the page's URL (?relay=<id>), so a reload, served by any worker, follows the same
// stream: the server sends the message so far, then the rest, live. The view is rebuilt
// from that, so nothing shows twice. An agent loop is relayed as a turn (?relay=<id>&turn=1):
// its responses, as steps, and the tool results between them, as one message.

import { MessageView, hooks, setStatus, sseData } from "./app.js";

const $ = (selector) => document.querySelector(selector);
const RETRIES = 5; // reconnections of one stream after a network error, with backoff
let current = null;

function relayChecked() {
  const box = $("#relay");
  return Boolean(box && box.checked);
}

async function available() {
  try {
    return (await fetch("/relay/info")).ok;
  } catch {
    return false;
  }
}

function setUrl(id, recording, turn) {
  const url = new URL(location.href);
  if (id) url.searchParams.set("relay", id);
  else url.searchParams.delete("relay");
  if (id && turn) url.searchParams.set("turn", "1");
  else url.searchParams.delete("turn");
  if (recording) url.searchParams.set("recording", recording); // selected again on reload
  history.replaceState(null, "", url);
}

// The Stop button, while a relayed stream is followed. Closing this page's reader would
// stop nothing: the stop goes to the relay, which tells the worker producing the answer
// (any worker takes it), and every reader, this page too, then gets the end: a turn's
// `abort` (shown stopped, no step after it), a single stream's cancelled message.
function offerStop(id, turn) {
  const button = $("#stop");
  if (!button) return;
  button.hidden = false;
  button.disabled = false;
  button.title = button.dataset.title ??= button.title;
  button.onclick = async () => {
    button.disabled = true;
    try {
      const path = turn ? "/relay/turn/stop/" : "/relay/stop/";
      const response = await fetch(`${path}${encodeURIComponent(id)}`, { method: "POST" });
      if (!response.ok) throw new Error((await response.json()).error?.message ?? response.statusText);
      setStatus("streaming", "stopping…");
    } catch (error) {
      button.disabled = false; // the answer goes on: it may be stopped again
      button.title = `the stop failed: ${error.message ?? error}`;
    }
  };
}

function withdrawStop() {
  const button = $("#stop");
  if (!button) return;
  button.hidden = true;
  button.onclick = null;
}

// Follow a relayed stream to its end; after a dropped connection, start over from the
// server's snapshot (a fresh view, so nothing is duplicated).
async function follow(id, turn) {
  if (current) current.abort();
  const controller = new AbortController();
  current = controller;
  offerStop(id, turn);
  try {
    await followed(id, turn, controller);
  } finally {
    if (current === controller) withdrawStop(); // over: nothing left to stop
  }
}

async function followed(id, turn, controller) {
  const path = turn ? "/relay/turn/ui-stream/" : "/relay/ui-stream/";
  document.body.dataset.relay = id;
  for (let attempt = 0; attempt <= RETRIES; attempt++) {
    const view = new MessageView($("#message"), $("#finish"), $("#counter"));
    setStatus("streaming", attempt ? "reconnected…" : "streaming…");
    let finished = false;
    try {
      const response = await fetch(`${path}${encodeURIComponent(id)}`, { signal: controller.signal });
      if (!response.ok) throw Object.assign(new Error((await response.json()).error?.message ?? response.statusText), { fatal: true });
      for await (const data of sseData(response.body)) {
        if (data === "[DONE]") { finished = true; break; }
        view.handle(JSON.parse(data));
      }
      if (finished) {
        if (current === controller) setStatus(...view.outcome());
        return;
      }
    } catch (error) {
      if (controller.signal.aborted) return;
      if (error.fatal || attempt === RETRIES) {
        view.on_error({ errorText: String(error.message ?? error) });
        setStatus("error", "failed");
        return;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 250 * 2 ** attempt));
  }
}

async function start(recording, speed) {
  if (current) current.abort();
  setStatus("streaming", "starting…");
  try {
    const response = await fetch("/relay/start", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ recording, speed: Number(speed) }),
    });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error?.message ?? response.statusText);
    setUrl(body.id, body.recording, body.turn);
    await follow(body.id, body.turn);
  } catch (error) {
    const view = new MessageView($("#message"), $("#finish"), $("#counter"));
    view.on_error({ errorText: String(error.message ?? error) });
    setStatus("error", "failed");
  }
}

async function init() {
  const params = new URLSearchParams(location.search);
  const wanted = params.get("relay");
  if (!(await available())) return;
  const label = document.querySelector(".relay-switch");
  if (label) label.style.display = "";
  hooks.submit = (recording, speed) => {
    if (!relayChecked()) {
      if (current) current.abort();
      withdrawStop();
      setUrl(null);
      return false;
    }
    start(recording, speed);
    return true;
  };
  if (wanted) {
    $("#relay").checked = true;
    follow(wanted, params.get("turn") === "1");
  }
}

init();
