// kvlm serve driven by the official `@anthropic-ai/sdk` Node client: messages, plain and
// streamed (the SDK checks the SSE event grammar as it assembles the message), and errors.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { generate, url } from './common.mjs';

const client = new Anthropic({ baseURL: url, apiKey: 'unused', maxRetries: 0 });
const params = { model: 'default', max_tokens: 16, temperature: 0, messages: [{ role: 'user', content: 'Tell me about the sea' }] };

test('messages: greedy text equals kvlm generate --chat', async () => {
  const expected = generate('Tell me about the sea', 16, { chat: true });
  assert.ok(expected.length > 0);
  const m = await client.messages.create(params);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, 'default');
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, 'text');
  assert.equal(m.content[0].text, expected);
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason));
  assert.ok(m.usage.input_tokens > 0);
  assert.ok(m.usage.output_tokens > 0 && m.usage.output_tokens <= 16);
});

test('messages stream: events in Anthropic order, same message as non-streamed', async () => {
  const whole = await client.messages.create(params);
  const stream = client.messages.stream(params);
  const events = [];
  let text = '';
  stream.on('streamEvent', (e) => events.push(e.type));
  stream.on('text', (t) => (text += t));
  const final = await stream.finalMessage();
  assert.equal(events[0], 'message_start');
  assert.equal(events[1], 'content_block_start');
  assert.ok(events.includes('content_block_delta'));
  assert.deepEqual(events.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  assert.equal(text, whole.content[0].text);
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
});

test('stop_sequences: cut before the sequence, stop_reason stop_sequence', async () => {
  const full = generate('Hello', 30, { chat: true });
  assert.ok(full.length >= 6, `too little text to cut: ${JSON.stringify(full)}`);
  const stop = full.slice(3, 6);
  const m = await client.messages.create({ ...params, max_tokens: 30, messages: [{ role: 'user', content: 'Hello' }], stop_sequences: [stop] });
  assert.equal(m.content[0]?.text ?? '', full.slice(0, full.indexOf(stop)));
  assert.equal(m.stop_reason, 'stop_sequence');
  assert.equal(m.stop_sequence, stop);
});

test('errors: BadRequestError with the Anthropic error body', async () => {
  await assert.rejects(client.messages.create({ ...params, temperature: -1 }), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError, String(e));
    assert.equal(e.status, 400);
    assert.deepEqual(e.error, { type: 'error', error: { type: 'invalid_request_error', message: 'temperature must be a non-negative float' } });
    return true;
  });
  await assert.rejects(client.messages.create({ ...params, messages: [] }), (e) => e instanceof Anthropic.BadRequestError
    && e.error.error.message === 'messages must be a non-empty array');
});
