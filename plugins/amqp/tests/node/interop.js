// Drives the rhea AMQP 1.0 client (an implementation independent of proton)
// against a RelayMQ broker. Called by ../test_rhea.py; prints one JSON line.
//
//   node interop.js send     <port> <address> <count>
//   node interop.js receive  <port> <address> <count>
//   node interop.js scenario <port> [user] [password]
'use strict';

const rhea = require('rhea');

const [mode, portArg, ...rest] = process.argv.slice(2);
const port = parseInt(portArg, 10);

function finish(result, code = 0) {
    process.stdout.write(JSON.stringify(result) + '\n');
    process.exit(code);
}

setTimeout(() => finish({ error: 'timed out' }, 2), 20000);

function connect(options = {}) {
    const container = rhea.create_container({ id: options.id || 'rhea-' + process.pid });
    const conn = container.connect(Object.assign({ host: '127.0.0.1', port, reconnect: false }, options));
    conn.on('connection_error', (ctx) => finish({ error: 'connection error: ' + JSON.stringify(ctx.connection.error) }, 1));
    conn.on('disconnected', (ctx) => { if (!conn.closing) finish({ error: 'disconnected: ' + (ctx.error || '') }, 1); });
    return conn;
}

function bodyFor(i) {
    switch (i % 4) {
        case 0: return 'text ' + i;
        case 1: return rhea.message.data_section(Buffer.from([i & 0xff, 1, 2, 3]));
        case 2: return { map: i, nested: [1, 'two'] };
        default: return [i, 'list'];
    }
}

function plain(body) {
    if (body && body.typecode === 0x75) return { data: Array.from(body.content) };
    if (Buffer.isBuffer(body)) return { binary: Array.from(body) };
    return body;
}

function send(address, count) {
    const conn = connect();
    const sender = conn.open_sender({ target: { address } });
    let sent = 0, accepted = 0;
    sender.on('sendable', () => {
        while (sender.sendable() && sent < count) {
            sender.send({
                message_id: 'rhea-' + sent, subject: 'kind', durable: sent % 2 === 0, priority: 7,
                application_properties: { i: sent, who: 'rhea' }, body: bodyFor(sent),
            });
            sent++;
        }
    });
    sender.on('accepted', () => { if (++accepted === count) { conn.closing = true; conn.close(); finish({ sent, accepted }); } });
    sender.on('rejected', (ctx) => finish({ error: 'rejected: ' + JSON.stringify(ctx.delivery.remote_state) }, 1));
}

function receive(address, count) {
    const conn = connect();
    const got = [];
    const receiver = conn.open_receiver({ source: { address }, credit_window: 10, autoaccept: false });
    receiver.on('message', (ctx) => {
        const m = ctx.message;
        got.push({
            body: plain(m.body), id: m.message_id, subject: m.subject, props: m.application_properties,
            durable: !!m.durable, priority: m.priority, delivery_count: m.delivery_count || 0,
        });
        ctx.delivery.accept();
        if (got.length === count) { conn.closing = true; conn.close(); finish({ messages: got }); }
    });
}

// Several behaviours in one connection; each check records what it saw.
function scenario(user, password) {
    const conn = connect(user ? { username: user, password, id: 'rhea-scenario' } : { id: 'rhea-scenario' });
    const checks = {};
    const steps = [queueRoundTrip, releaseAndModify, selector, dynamicReplyQueue, anonymousRelay, topic, invalidSelector];
    let step = 0;
    function next() {
        if (step === steps.length) { conn.closing = true; conn.close(); finish({ checks }); return; }
        steps[step++](next);
    }
    function queueRoundTrip(done) {
        const s = conn.open_sender('queue://rhea.rt');
        s.once('sendable', () => s.send({ body: 'hello', message_id: 'm1' }));
        s.once('accepted', () => {
            const r = conn.open_receiver({ source: 'queue://rhea.rt', autoaccept: false });
            r.once('message', (ctx) => { checks.round_trip = ctx.message.body; ctx.delivery.accept(); r.close(); s.close(); done(); });
        });
    }
    function releaseAndModify(done) {
        const s = conn.open_sender('queue://rhea.rel');
        s.once('sendable', () => s.send({ body: 'again' }));
        const r = conn.open_receiver({ source: 'queue://rhea.rel', autoaccept: false, credit_window: 1 });
        const counts = [];
        r.on('message', (ctx) => {
            counts.push(ctx.message.delivery_count || 0);
            if (counts.length === 1) ctx.delivery.release();
            else if (counts.length === 2) ctx.delivery.modified({ delivery_failed: true });
            else { ctx.delivery.accept(); checks.redelivery_counts = counts; r.close(); s.close(); done(); }
        });
    }
    function selector(done) {
        const s = conn.open_sender('queue://rhea.sel');
        s.once('sendable', () => {
            s.send({ body: 'blue', application_properties: { color: 'blue' } });
            s.send({ body: 'red', application_properties: { color: 'red' } });
        });
        const r = conn.open_receiver({ source: { address: 'queue://rhea.sel', filter: rhea.filter.selector("color = 'red'") } });
        r.once('message', (ctx) => { checks.selector = ctx.message.body; r.close(); s.close(); done(); });
    }
    function dynamicReplyQueue(done) {
        const r = conn.open_receiver({ source: { dynamic: true } });
        r.once('receiver_open', () => {
            checks.dynamic_address = r.source.address;
            const s = conn.open_sender(r.source.address);
            s.once('sendable', () => s.send({ body: 'reply' }));
            r.once('message', (ctx) => { checks.dynamic_body = ctx.message.body; r.close(); s.close(); done(); });
        });
    }
    function anonymousRelay(done) {
        checks.offered = conn.remote.open.offered_capabilities;
        const r = conn.open_receiver('queue://rhea.relay');
        const s = conn.open_sender();
        s.once('sendable', () => s.send({ to: 'queue://rhea.relay', body: 'relayed' }));
        r.once('message', (ctx) => { checks.relay = ctx.message.body; r.close(); s.close(); done(); });
    }
    function topic(done) {
        const r1 = conn.open_receiver({ source: { address: 'news', capabilities: ['topic'] } });
        const r2 = conn.open_receiver('topic://news');
        let opened = 0, got = [];
        const onOpen = () => {
            if (++opened < 2) return;
            const s = conn.open_sender({ target: { address: 'news', capabilities: ['topic'] } });
            s.once('sendable', () => s.send({ body: 'extra' }));
        };
        const onMessage = (ctx) => { got.push(ctx.message.body); if (got.length === 2) { checks.topic = got; r1.close(); r2.close(); done(); } };
        for (const r of [r1, r2]) { r.once('receiver_open', onOpen); r.on('message', onMessage); }
    }
    function invalidSelector(done) {
        const r = conn.open_receiver({ source: { address: 'queue://rhea.bad', filter: rhea.filter.selector('= nope') } });
        r.once('receiver_error', (ctx) => { checks.invalid_selector = r.error && r.error.condition; });
        r.once('receiver_close', () => { checks.invalid_selector = checks.invalid_selector || (r.error && r.error.condition); done(); });
    }
    conn.once('connection_open', next);
}

if (mode === 'send') send(rest[0], parseInt(rest[1], 10));
else if (mode === 'receive') receive(rest[0], parseInt(rest[1], 10));
else if (mode === 'scenario') scenario(rest[0], rest[1]);
else finish({ error: 'unknown mode ' + mode }, 2);
