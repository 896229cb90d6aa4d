// Run AG-UI event streams through the protocol's own TypeScript client.
//
// stdin:  {"<name>": {"body": "<the SSE body>", "threadId": "...", "runId": "..."}, ...}
//         or {"<name>": {"url": "http://...", ...}}: the agent POSTs its RunAgentInput
//         there and reads the server's answer (a real HTTP request); "initialMessages"
//         are the agent's messages before the run (the chat so far), if any
// stdout: {"<name>": {"messages": <the agent's messages after the run>, "result": ...,
//                      "events": [<types, as the client saw them>], "error": <why it failed>,
//                      "snapshot": [<the ids of a MESSAGES_SNAPSHOT's messages>] or null,
//                      "outcome": <RUN_FINISHED's outcome type> or null}}
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

async function runOne({ body, url, threadId, runId, initialMessages }) {
  const agent = new HttpAgent({
    url: url ?? "http://streamfold.invalid/agui",
    threadId,
    initialMessages: initialMessages ?? [],
    ...(url === undefined && {
      fetch: async () =>
        new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } }),
    }),
  });
  const events = [];
  let error = null;
  let result = null;
  let snapshot = null;
  let outcome = null;
  try {
    const run = await agent.runAgent(
      { runId },
      {
        onEvent: ({ event }) => {
          events.push(event.type);
          if (event.type === "MESSAGES_SNAPSHOT") snapshot = event.messages.map((m) => m.id);
          if (event.type === "RUN_FINISHED") outcome = event.outcome?.type ?? null;
        },
      },
    );
    result = run.result ?? null;
  } catch (e) {
    error = String(e?.message ?? e);
  }
  return { messages: agent.messages, result, events, error, snapshot, outcome };
}

const input = JSON.parse(await readAll(process.stdin));
const output = {};
// The runs go at once (readers of one relayed turn are there at the same time).
await Promise.all(
  Object.entries(input).map(async ([name, run]) => {
    try {
      output[name] = await runOne(run);
    } catch (e) {
      output[name] = { messages: [], events: [], error: `reader: ${e?.stack ?? e}` };
    }
  }),
);
process.stdout.write(JSON.stringify(output));
