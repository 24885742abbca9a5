// A GitHub webhook receiver as a Node team would write one with
// @octokit/webhooks: it verifies each delivery's signature, parses it,
// hands it to its handlers, appends it to a file and makes it durable
// before it answers 202. bench/webhook_test.go runs it beside Switchyard
// on the same fixture and clients.
//
//   node server.mjs --secret S --file F --sync each|group
//
// --sync each: one fsync per delivery, as a receiver that answers only
// once its delivery is on disk does. --sync group: deliveries that arrive
// while an fsync runs share the next one, as Switchyard's group commit
// does. It listens on a free port of 127.0.0.1 and prints "listening PORT".
import http from "node:http";
import { open } from "node:fs/promises";
import { parseArgs } from "node:util";
import { Webhooks } from "@octokit/webhooks";

const { values: args } = parseArgs({
  options: {
    secret: { type: "string" },
    file: { type: "string" },
    sync: { type: "string", default: "each" },
  },
});
if (!args.secret || !args.file || !["each", "group"].includes(args.sync)) {
  console.error("usage: node server.mjs --secret S --file F --sync each|group");
  process.exit(2);
}

const log = await open(args.file, "a");
const webhooks = new Webhooks({ secret: args.secret });
// What a handler reads to decide: the event, its action and what it is on.
webhooks.onAny(({ name, payload }) => {
  const on = payload.pull_request ?? payload.issue;
  if (!name || !payload.repository || (on && typeof on.number !== "number")) {
    throw new Error("unexpected payload");
  }
});

// persist appends one delivery and resolves once it is durable.
let persist;
if (args.sync === "each") {
  persist = async (record) => {
    await log.write(record);
    await log.sync();
  };
} else {
  let waiting = [];
  let syncing = false;
  const flush = async () => {
    syncing = true;
    while (waiting.length > 0) {
      const batch = waiting;
      waiting = [];
      try {
        await log.write(Buffer.concat(batch.map((w) => w.record)));
        await log.sync();
        for (const w of batch) w.resolve();
      } catch (err) {
        for (const w of batch) w.reject(err);
      }
    }
    syncing = false;
  };
  persist = (record) =>
    new Promise((resolve, reject) => {
      waiting.push({ record, resolve, reject });
      if (!syncing) flush();
    });
}

const server = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = Buffer.concat(chunks);
  const id = req.headers["x-github-delivery"];
  try {
    await webhooks.verifyAndReceive({
      id,
      name: req.headers["x-github-event"],
      payload: body.toString("utf8"),
      signature: req.headers["x-hub-signature-256"],
    });
    const head = Buffer.from(JSON.stringify({ id, event: req.headers["x-github-event"], bytes: body.length }) + "\n");
    await persist(Buffer.concat([head, body, Buffer.from("\n")]));
    res.writeHead(202, { "content-type": "application/json" });
    res.end('{"status":"accepted"}');
  } catch (err) {
    res.writeHead(err.status ?? 500, { "content-type": "application/json" });
    res.end(JSON.stringify({ status: "error", error: String(err.message) }));
  }
});
server.keepAliveTimeout = 120_000;
server.listen(0, "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});
process.on("SIGTERM", () => server.close(() => log.close().then(() => process.exit(0))));
