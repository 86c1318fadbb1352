// The official `openai` npm client against a running `rlx serve` (driven by serve_test.py).
// Usage: node openai_client.mjs NPM_DIR BASE_URL API_KEY CASE ARGS_JSON
// Prints one JSON object: what the case observed (the driver compares it with rlx's own verbs).
import { createRequire } from "node:module";

const [npmDir, baseURL, apiKey, kase, argsJson] = process.argv.slice(2);
const require = createRequire(npmDir + "/node_modules/");
const { default: OpenAI } = await import(require.resolve("openai"));
const args = JSON.parse(argsJson || "{}");
const client = new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 120000 });

async function chatStream(body) {
  const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let text = "", finish = null, usage = null, chunks = 0, role = null;
  for await (const c of stream) {
    chunks++;
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      if (ch.delta.role) role = ch.delta.role;
      if (ch.delta.content) text += ch.delta.content;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { text, finish, usage, chunks, role };
}

async function errorOf(promise) {
  try {
    await promise;
    return { ok: true };
  } catch (e) {
    return { ok: false, cls: e.constructor.name, status: e.status, code: e.code ?? null, type: e.type ?? null, message: e.message };
  }
}

const out = {};
if (kase === "basic") {
  out.models = (await client.models.list()).data.map((m) => m.id).sort();
  const chat = await client.chat.completions.create({ model: args.model, messages: [{ role: "user", content: args.chat }],
                                                      temperature: 0, max_tokens: args.n });
  out.chat = { text: chat.choices[0].message.content, finish: chat.choices[0].finish_reason, usage: chat.usage,
               object: chat.object, role: chat.choices[0].message.role };
  out.stream = await chatStream({ model: args.model, messages: [{ role: "user", content: args.chat }], temperature: 0, max_tokens: args.n });
  const comp = await client.completions.create({ model: args.model, prompt: args.prompt, temperature: 0, max_tokens: args.n });
  out.completion = { text: comp.choices[0].text, finish: comp.choices[0].finish_reason, usage: comp.usage };
  const lp = await client.chat.completions.create({ model: args.model, messages: [{ role: "user", content: args.chat }],
                                                    temperature: 0, max_tokens: 4, logprobs: true, top_logprobs: 3 });
  out.logprobs = lp.choices[0].logprobs.content.map((t) => ({ token: t.token, logprob: t.logprob, top: t.top_logprobs.map((x) => x.logprob) }));
  // seeded sampling is reproducible
  const s1 = await client.chat.completions.create({ model: args.model, messages: [{ role: "user", content: args.chat }],
                                                    temperature: 0.9, top_p: 0.95, seed: 7, max_tokens: args.n });
  const s2 = await client.chat.completions.create({ model: args.model, messages: [{ role: "user", content: args.chat }],
                                                    temperature: 0.9, top_p: 0.95, seed: 7, max_tokens: args.n });
  out.seeded = [s1.choices[0].message.content, s2.choices[0].message.content];
  // embeddings: the client asks for base64 and decodes it; then floats explicitly
  const e64 = await client.embeddings.create({ model: args.embed_model, input: args.texts });
  const ef = await client.embeddings.create({ model: args.embed_model, input: args.texts, encoding_format: "float" });
  out.embeddings = { base64: e64.data.map((d) => Array.from(d.embedding)), float: ef.data.map((d) => d.embedding), usage: ef.usage };
  const one = await client.embeddings.create({ model: args.embed_model, input: args.texts[0], encoding_format: "float" });
  out.embedding_one = one.data[0].embedding;
  // errors as the client's error types
  const bad = new OpenAI({ apiKey: "wrong", baseURL, maxRetries: 0 });
  out.errors = {
    auth: await errorOf(bad.models.list()),
    unknown_model: await errorOf(client.chat.completions.create({ model: "nope", messages: [{ role: "user", content: "x" }] })),
    bad_type: await errorOf(client.chat.completions.create({ model: args.model, messages: [{ role: "user", content: "x" }], temperature: "hot" })),
    too_long: await errorOf(client.completions.create({ model: args.model, prompt: args.long_prompt, max_tokens: 4 })),
    n2: await errorOf(client.chat.completions.create({ model: args.model, messages: [{ role: "user", content: "x" }], n: 2 })),
    wrong_kind: await errorOf(client.embeddings.create({ model: args.model, input: "x" })),
    penalty: await errorOf(client.chat.completions.create({ model: args.model, messages: [{ role: "user", content: "x" }], presence_penalty: 0.5 })),
    neutral: await errorOf(client.chat.completions.create({ model: args.model, messages: [{ role: "user", content: "x" }], max_tokens: 2,
                                                           presence_penalty: 0, frequency_penalty: 0, user: "u" })),
  };
} else if (kase === "load") {
  // `streams` concurrent streaming chats, greedy; each must equal its prompt's solo result
  const t0 = Date.now();
  const results = await Promise.all(args.prompts.map((p) =>
    chatStream({ model: args.model, messages: [{ role: "user", content: p }], temperature: 0, max_tokens: args.n })));
  out.seconds = (Date.now() - t0) / 1000;
  out.results = results;
} else if (kase === "prefix") {
  // chats that share a long system message, one after the other: the later ones reuse its blocks
  out.results = [];
  for (const q of args.questions) {
    const r = await client.chat.completions.create({ model: args.model, temperature: 0, max_tokens: args.n,
      messages: [{ role: "system", content: args.system }, { role: "user", content: q }] });
    out.results.push({ text: r.choices[0].message.content, finish: r.choices[0].finish_reason, usage: r.usage });
  }
} else if (kase === "solo") {
  out.results = [];
  for (const p of args.prompts) {
    const r = await client.chat.completions.create({ model: args.model, messages: [{ role: "user", content: p }], temperature: 0, max_tokens: args.n });
    out.results.push({ text: r.choices[0].message.content, finish: r.choices[0].finish_reason, usage: r.usage });
  }
}
console.log(JSON.stringify(out));
