// Read UI message streams the way `useChat` does, with the `ai` package's own code.
//
// stdin:  {"<name>": "<the SSE body>", ...}
// stdout: {"<name>": {"message": <final UIMessage>, "errors": [...], "chunks": [<types>],
//                      "valid": <safeValidateUIMessages said so>, "invalid": <why not>}}
//
// Each body goes through DefaultChatTransport (fetch answered with the body, parsed with
// parseJsonEventStream + uiMessageChunkSchema: a chunk of the wrong shape is an error)
// and readUIMessageStream (the state machine useChat runs).
import { DefaultChatTransport, readUIMessageStream, safeValidateUIMessages } from "ai";

const HEADERS = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache",
  "x-vercel-ai-ui-message-stream": "v1",
};

async function readAll(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

async function readOne(body) {
  const transport = new DefaultChatTransport({
    api: "http://streamfold.invalid/ui-stream",
    fetch: async () => new Response(body, { status: 200, headers: HEADERS }),
  });
  const stream = await transport.sendMessages({
    chatId: "chat",
    messages: [],
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
  });
  const [forReader, forTypes] = stream.tee();
  const errors = [];
  let message = null;
  const types = (async () => {
    const seen = [];
    try {
      for await (const chunk of forTypes) seen.push(chunk.type);
    } catch (error) {
      errors.push(`chunk stream: ${error?.message ?? error}`);
    }
    return seen;
  })();
  for await (const snapshot of readUIMessageStream({
    stream: forReader,
    onError: (error) => errors.push(String(error?.message ?? error)),
  })) {
    message = snapshot;
  }
  let valid = false;
  let invalid = null;
  if (message !== null) {
    const result = await safeValidateUIMessages({ messages: [message] });
    valid = result.success;
    if (!result.success) invalid = String(result.error?.message ?? result.error);
  }
  return { message, errors, chunks: await types, valid, invalid };
}

const input = JSON.parse(await readAll(process.stdin));
const output = {};
for (const [name, body] of Object.entries(input)) {
  try {
    output[name] = await readOne(body);
  } catch (error) {
    output[name] = { message: null, errors: [`reader: ${error?.stack ?? error}`], chunks: [] };
  }
}
process.stdout.write(JSON.stringify(output));
