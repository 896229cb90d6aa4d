// Judge UI messages with the `ai` package's own code.
//
// stdin:  {"<name>": [<UIMessage>, ...], ...}
// stdout: {"<name>": {"valid": <validateUIMessages accepted them>, "invalid": <why not>,
//                      "model": <convertToModelMessages of them, or null>,
//                      "convertError": <why it threw>}}
import { convertToModelMessages, safeValidateUIMessages } from "ai";

async function readAll(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

const input = JSON.parse(await readAll(process.stdin));
const output = {};
for (const [name, messages] of Object.entries(input)) {
  const result = await safeValidateUIMessages({ messages });
  let model = null;
  let convertError = null;
  try {
    model = await convertToModelMessages(messages);
  } catch (error) {
    convertError = String(error?.message ?? error);
  }
  output[name] = {
    valid: result.success,
    invalid: result.success ? null : String(result.error?.message ?? result.error),
    model,
    convertError,
  };
}
process.stdout.write(JSON.stringify(output));
