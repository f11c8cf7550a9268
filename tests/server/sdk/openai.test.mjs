// kvlm serve driven by the official `openai` Node client: chat (plain and streamed), text
// completions, models, tools, logprobs, stop strings and errors. Greedy output must equal what
// `kvlm generate` prints for the same prompt.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';
import { generate, url } from './common.mjs';

const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
const user = (content) => [{ role: 'user', content }];

async function streamedChat(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  let role = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    role ??= choice.delta.role ?? null;
    text += choice.delta.content ?? '';
    finish = choice.finish_reason ?? finish;
  }
  return { text, finish, usage, role };
}

test('models: list and retrieve the served model', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), ['default']);
  const model = await client.models.retrieve('default');
  assert.equal(model.id, 'default');
  assert.equal(model.object, 'model');
  await assert.rejects(client.models.retrieve('nope'), (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
});

test('chat: greedy output equals kvlm generate --chat, streamed and not', async () => {
  const prompt = 'Tell me about the sea';
  const expected = generate(prompt, 16, { chat: true });
  assert.ok(expected.length > 0);
  const whole = await client.chat.completions.create({ model: 'default', messages: user(prompt), max_tokens: 16, temperature: 0 });
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices.length, 1);
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.equal(whole.choices[0].message.content, expected);
  assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
  assert.ok(whole.usage.prompt_tokens > 0);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);

  const streamed = await streamedChat({ model: 'default', messages: user(prompt), max_tokens: 16, temperature: 0 });
  assert.equal(streamed.role, 'assistant');
  assert.equal(streamed.text, expected);
  assert.equal(streamed.finish, whole.choices[0].finish_reason);
  assert.equal(streamed.usage.completion_tokens, whole.usage.completion_tokens);
  assert.equal(streamed.usage.prompt_tokens, whole.usage.prompt_tokens);
});

test('completions: greedy output equals kvlm generate, streamed and not', async () => {
  const prompt = 'Once upon a time';
  const expected = generate(prompt, 20);
  assert.ok(expected.length > 0);
  const whole = await client.completions.create({ model: 'default', prompt, max_tokens: 20, temperature: 0 });
  assert.equal(whole.object, 'text_completion');
  assert.equal(whole.choices[0].text, expected);
  let text = '';
  for await (const chunk of await client.completions.create({ model: 'default', prompt, max_tokens: 20, temperature: 0, stream: true }))
    text += chunk.choices[0]?.text ?? '';
  assert.equal(text, expected);
});

test('stop strings end generation and never reach the client', async () => {
  const prompt = 'Once upon a time';
  const full = generate(prompt, 30);
  assert.ok(full.length >= 12, `too little text to cut: ${JSON.stringify(full)}`);
  const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 3);
  const expected = full.slice(0, full.indexOf(stop));
  const whole = await client.completions.create({ model: 'default', prompt, max_tokens: 30, temperature: 0, stop: [stop] });
  assert.equal(whole.choices[0].text, expected);
  assert.equal(whole.choices[0].finish_reason, 'stop');
  let text = '';
  for await (const chunk of await client.completions.create({ model: 'default', prompt, max_tokens: 30, temperature: 0, stop, stream: true }))
    text += chunk.choices[0]?.text ?? '';
  assert.equal(text, expected);

  const chatFull = generate('Hello', 30, { chat: true });
  assert.ok(chatFull.length >= 6, `too little chat text to cut: ${JSON.stringify(chatFull)}`);
  const chatStop = chatFull.slice(3, 6);
  const chatExpected = chatFull.slice(0, chatFull.indexOf(chatStop));
  const streamed = await streamedChat({ model: 'default', messages: user('Hello'), max_tokens: 30, temperature: 0, stop: chatStop });
  assert.equal(streamed.text, chatExpected);
  assert.equal(streamed.finish, 'stop');
});

test('logprobs: OpenAI shape for chat, mlx_lm block for completions', async () => {
  const r = await client.chat.completions.create({
    model: 'default', messages: user('Hi'), max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3,
  });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content);
  for (const e of content) {
    assert.ok(e.logprob <= 0);
    assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
    assert.equal(e.top_logprobs.length, 3);
    // Greedy: the chosen token is the most likely one, and the alternatives come sorted.
    assert.equal(e.top_logprobs[0].token, e.token);
    assert.equal(e.top_logprobs[0].logprob, e.logprob);
    for (let i = 1; i < 3; ++i) assert.ok(e.top_logprobs[i - 1].logprob >= e.top_logprobs[i].logprob);
  }
  const c = await client.completions.create({ model: 'default', prompt: 'Hi', max_tokens: 3, temperature: 0, logprobs: true, top_logprobs: 2 });
  const block = c.choices[0].logprobs.content;
  assert.equal(block.length, 3);
  for (const e of block) {
    assert.equal(typeof e.id, 'number');
    assert.equal(e.top_logprobs[0].id, e.id);
  }
});

test('tools: accepted, template-rendered, and answered in the OpenAI shape', async () => {
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather for a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  }];
  const messages = [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '18 C, sunny' },
  ];
  for (const tool_choice of ['auto', 'required', { type: 'function', function: { name: 'get_weather' } }]) {
    const r = await client.chat.completions.create({ model: 'default', messages, tools, tool_choice, max_tokens: 8, temperature: 0 });
    // The bundled model writes no tool-call markup, so the answer is text.
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.equal(r.choices[0].message.tool_calls, undefined);
    assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  }
  const none = await client.chat.completions.create({ model: 'default', messages: user('Hi'), tools, tool_choice: 'none', max_tokens: 4, temperature: 0 });
  const plain = await client.chat.completions.create({ model: 'default', messages: user('Hi'), max_tokens: 4, temperature: 0 });
  assert.equal(none.choices[0].message.content, plain.choices[0].message.content);
});

test('errors: BadRequestError naming the field, server keeps serving', async () => {
  const cases = [
    [{ temperature: -1 }, 'temperature', 'temperature must be a non-negative float'],
    [{ top_p: 2 }, 'top_p', 'top_p must be a float between 0 and 1'],
    [{ max_tokens: 0 }, 'max_tokens', 'max_tokens must be a positive integer'],
    [{ top_logprobs: 12 }, 'top_logprobs', 'top_logprobs must be at most 11'],
    [{ n: 2 }, 'n', 'n must be 1: one choice per request is supported'],
    [{ messages: [] }, 'messages', 'messages must be a non-empty array'],
    [{ messages: [{ role: 'wizard', content: 'x' }] }, 'messages',
      "messages[0].role must be one of system, user, assistant, tool, developer (got 'wizard')"],
  ];
  for (const [extra, param, message] of cases) {
    await assert.rejects(
      client.chat.completions.create({ model: 'default', messages: user('Hi'), max_tokens: 4, ...extra }),
      (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, `${param}: ${e}`);
        assert.equal(e.status, 400);
        assert.equal(e.param, param);
        assert.equal(e.type, 'invalid_request_error');
        assert.equal(e.error.message, message);
        return true;
      },
    );
  }
  await assert.rejects(
    client.chat.completions.create({ model: 'default', messages: user('word '.repeat(3000)), max_tokens: 4 }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded' && e.param === 'messages',
  );
  const ok = await client.chat.completions.create({ model: 'default', messages: user('Hi'), max_tokens: 2 });
  assert.equal(ok.object, 'chat.completion');
});
