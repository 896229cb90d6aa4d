// Run AG-UI event streams through the protocol's own TypeScript client.
//
// stdin:  {"<name>": {"body": "<the SSE body>", "threadId": "...", "runId": "..."}, ...}
// stdout: {"<name>": {"messages": <the agent's messages after the run>, "result": ...,
//                      "events": [<types, as the client saw them>], "error": <why it failed>}}
//
// HttpAgent reads the body with its own SSE parser, checks the event sequence
// (verifyEvents: a content event for a message never started is an error) and applies
// the events to its messages (defaultApplyEvents), as CopilotKit's front-end does.
import { HttpAgent } from "@ag-ui/client";

async function readAll(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

async function runOne({ body, threadId, runId }) {
  const agent = new HttpAgent({
    url: "http://streamfold.invalid/agui",
    threadId,
    fetch: async () =>
      new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } }),
  });
  const events = [];
  let error = null;
  let result = null;
  try {
    const run = await agent.runAgent(
      { runId },
      { onEvent: ({ event }) => { events.push(event.type); } },
    );
    result = run.result ?? null;
  } catch (e) {
    error = String(e?.message ?? e);
  }
  return { messages: agent.messages, result, events, error };
}

const input = JSON.parse(await readAll(process.stdin));
const output = {};
for (const [name, run] of Object.entries(input)) {
  try {
    output[name] = await runOne(run);
  } catch (e) {
    output[name] = { messages: [], events: [], error: `reader: ${e?.stack ?? e}` };
  }
}
process.stdout.write(JSON.stringify(output));
