// The peer of tests/unit/chat_template_test.cpp: renders chat templates with @huggingface/jinja
// (Hugging Face's JavaScript Jinja, as transformers.js applies chat templates) and prints, for
// each case, {"ok": true, "text": ...} or {"ok": false, "error": message} as one JSON list.
// Usage: node jinja_render.cjs INPUT.json   ({"cases": [{"template": ..., "context": {...}}, ...]})
const fs = require('fs');
const { Template } = require('@huggingface/jinja');
const input = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const out = input.cases.map((c) => {
  try {
    return { ok: true, text: new Template(c.template).render(c.context) };
  } catch (e) {
    return { ok: false, error: String(e && e.message ? e.message : e) };
  }
});
process.stdout.write(JSON.stringify(out));
