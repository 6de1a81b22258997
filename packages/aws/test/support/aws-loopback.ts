/**
 * A loopback stand-in for the SNS and EventBridge APIs (and SQS's SendMessageBatch and an empty ReceiveMessage), for the real AWS SDK clients
 * pointed at it with `endpoint`. There is no local SNS or EventBridge server here, so this endpoint checks each wire
 * request against the services' API references — the protocol the SDK speaks (SNS: AWS query, form-encoded, XML
 * answers; EventBridge: AWS JSON 1.1; SQS: AWS JSON 1.0), a SigV4 signature for the right service, and the
 * documented limits and rules of the batch APIs — and answers per-entry results that a test scripts. A request that
 * breaks a rule is refused the way the service refuses it (HTTP 400 with the service's error code), and recorded in
 * `violations` so a test can assert there were none.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One entry as the endpoint decoded it, whatever the service. */
export interface DecodedEntry {
  readonly id?: string;
  /** SQS MessageBody / SNS Message / EventBridge Detail. */
  readonly body: string;
  readonly attributes: Readonly<Record<string, { readonly dataType: string; readonly value: string }>>;
  readonly groupId?: string;
  readonly deduplicationId?: string;
  /** EventBridge only. */
  readonly source?: string;
  readonly detailType?: string;
  readonly eventBus?: string;
}

/** A decoded batch request. */
export interface RecordedRequest {
  readonly service: 'sns' | 'eventbridge' | 'sqs';
  readonly action: string;
  /** The topic ARN (SNS) or queue URL (SQS); undefined for EventBridge. */
  readonly target?: string;
  readonly entries: readonly DecodedEntry[];
}

/**
 * What the scripted service answers for one entry; `blank` (EventBridge only) is a result entry with neither an
 * `EventId` nor an `ErrorCode`, which the API reference does not document.
 */
export type EntryDecision =
  | 'ok'
  | 'blank'
  | { readonly code: string; readonly message?: string; readonly senderFault: boolean };

/**
 * What the whole request gets instead of per-entry results (a throttled or failing service); `hang`: no answer at
 * all (a lost response, a half-open connection) until the client gives up or the endpoint closes.
 */
export type RequestDecision =
  | 'entries'
  | 'hang'
  | { readonly status: number; readonly code: string; readonly message?: string };

export interface AwsLoopback {
  /** `http://127.0.0.1:<port>`: the `endpoint` of the SDK clients. */
  readonly endpoint: string;
  readonly requests: RecordedRequest[];
  /** Rule violations seen in requests (each also answered with a 400). */
  readonly violations: string[];
  /** Requests given no answer (`decideRequest` said `hang`). */
  readonly hanging: number;
  /** Decides each entry; default every entry `ok`. */
  decideEntry: (entry: DecodedEntry, request: RecordedRequest) => EntryDecision;
  /** Decides the whole request first; default `entries`. */
  decideRequest: (request: RecordedRequest) => RequestDecision;
  close(): Promise<void>;
}

const MAX_BATCH_ENTRIES = 10;
/**
 * Most bytes of one message and of a batch request's messages together: SQS 1 MiB (its API reference since 2025),
 * SNS 256 KiB (a topic's default `MaximumMessageSize`).
 */
const MAX_BATCH_BYTES = { sqs: 1_048_576, sns: 262_144 } as const;
/** PutEvents: "the total entry size must be less than 1MB". */
const PUT_EVENTS_SIZE_LIMIT = 1_048_576;
/** PutEventsRequestEntry.DetailType: "Maximum length of 128". */
const MAX_DETAIL_TYPE_LENGTH = 128;
const BATCH_ENTRY_ID = /^[A-Za-z0-9_-]{1,80}$/;
const ATTRIBUTE_NAME = /^[A-Za-z0-9_.-]{1,256}$/;
const GROUP_OR_DEDUP_ID = /^[A-Za-z0-9!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]{1,128}$/;
const XML_TEXT = /^[\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]*$/u;

const bytes = (text: string) => Buffer.byteLength(text, 'utf8');

/** The rules SQS and SNS share for message attributes (SQS/SNS developer guides, "message attributes"). */
function attributeProblems(attributes: DecodedEntry['attributes']): string[] {
  const problems: string[] = [];
  const names = Object.keys(attributes);
  if (names.length > 10) problems.push(`${names.length} message attributes (at most 10)`);
  for (const name of names) {
    const a = attributes[name];
    if (!ATTRIBUTE_NAME.test(name))
      problems.push(`attribute name "${name}" has characters outside A-Za-z0-9_-.`);
    if (/^(aws|amazon)\./i.test(name)) problems.push(`attribute name "${name}" uses a reserved prefix`);
    if (name.startsWith('.') || name.endsWith('.') || name.includes('..')) {
      problems.push(`attribute name "${name}" starts or ends with a period or has two in a row`);
    }
    if (!a || !/^(String|Number|Binary)(\..+)?$/.test(a.dataType))
      problems.push(`attribute "${name}" has no valid DataType`);
    if (!a || a.value === '') problems.push(`attribute "${name}" has an empty value`);
    else if (!XML_TEXT.test(a.value)) problems.push(`attribute "${name}" has characters outside the XML set`);
  }
  return problems;
}

function messageSize(entry: DecodedEntry): number {
  let size = bytes(entry.body);
  for (const [name, a] of Object.entries(entry.attributes))
    size += bytes(name) + bytes(a.dataType) + bytes(a.value);
  return size;
}

function sqsOrSnsProblems(request: RecordedRequest, fifo: boolean): string[] {
  const problems: string[] = [];
  const maxBytes = MAX_BATCH_BYTES[request.service === 'sqs' ? 'sqs' : 'sns'];
  const { entries } = request;
  if (entries.length === 0) problems.push('EmptyBatchRequest: no entries');
  if (entries.length > MAX_BATCH_ENTRIES)
    problems.push(`TooManyEntriesInBatchRequest: ${entries.length} entries`);
  const ids = new Set<string>();
  let total = 0;
  for (const entry of entries) {
    if (entry.id === undefined || !BATCH_ENTRY_ID.test(entry.id))
      problems.push(`InvalidBatchEntryId: "${entry.id}"`);
    else if (ids.has(entry.id)) problems.push(`BatchEntryIdsNotDistinct: "${entry.id}"`);
    else ids.add(entry.id);
    if (entry.body === '') problems.push(`entry ${entry.id}: empty message body`);
    if (!XML_TEXT.test(entry.body))
      problems.push(`entry ${entry.id}: body has characters outside the XML set`);
    problems.push(...attributeProblems(entry.attributes).map((p) => `entry ${entry.id}: ${p}`));
    const size = messageSize(entry);
    if (size > maxBytes) problems.push(`entry ${entry.id}: ${size} bytes (at most ${maxBytes})`);
    total += size;
    if (fifo) {
      if (!entry.groupId || !GROUP_OR_DEDUP_ID.test(entry.groupId))
        problems.push(`entry ${entry.id}: FIFO needs a valid MessageGroupId`);
      if (!entry.deduplicationId || !GROUP_OR_DEDUP_ID.test(entry.deduplicationId)) {
        problems.push(
          `entry ${entry.id}: FIFO needs a MessageDeduplicationId (no content-based deduplication here)`,
        );
      }
    } else if (entry.groupId !== undefined && request.service === 'sqs') {
      problems.push(`entry ${entry.id}: MessageGroupId on a standard queue`);
    } else if (entry.deduplicationId !== undefined) {
      problems.push(
        `entry ${entry.id}: MessageDeduplicationId on a standard ${request.service === 'sqs' ? 'queue' : 'topic'}`,
      );
    }
  }
  if (total > maxBytes) problems.push(`BatchRequestTooLong: ${total} bytes (at most ${maxBytes})`);
  return problems;
}

/** PutEvents rules (EventBridge API reference, "PutEvents" and "Calculating PutEvents entry size"). */
function putEventsProblems(request: RecordedRequest): string[] {
  const problems: string[] = [];
  const { entries } = request;
  if (entries.length === 0) problems.push('no entries');
  if (entries.length > MAX_BATCH_ENTRIES) problems.push(`${entries.length} entries (at most 10)`);
  let total = 0;
  entries.forEach((entry, index) => {
    if (!entry.source) problems.push(`entry ${index}: no Source`);
    if (!entry.detailType) problems.push(`entry ${index}: no DetailType`);
    else if ([...entry.detailType].length > MAX_DETAIL_TYPE_LENGTH) {
      problems.push(`entry ${index}: DetailType longer than ${MAX_DETAIL_TYPE_LENGTH} characters`);
    }
    let detail: unknown;
    try {
      detail = JSON.parse(entry.body);
    } catch {
      problems.push(`entry ${index}: Detail is not JSON`);
    }
    if (typeof detail !== 'object' || detail === null || Array.isArray(detail)) {
      problems.push(`entry ${index}: Detail is not a JSON object`);
    }
    total += bytes(entry.source ?? '') + bytes(entry.detailType ?? '') + bytes(entry.body);
  });
  if (total >= PUT_EVENTS_SIZE_LIMIT) {
    problems.push(`entries total ${total} bytes (must be less than ${PUT_EVENTS_SIZE_LIMIT})`);
  }
  return problems;
}

/** SigV4 as the SDK signs: `AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/<service>/aws4_request, …`. */
function signatureProblem(req: IncomingMessage, service: string): string | undefined {
  const auth = req.headers.authorization ?? '';
  const match =
    /^AWS4-HMAC-SHA256 Credential=[^/]+\/\d{8}\/[a-z0-9-]+\/([a-z0-9-]+)\/aws4_request, SignedHeaders=[^,]+, Signature=[0-9a-f]{64}$/.exec(
      auth,
    );
  if (!match) return `request not signed with SigV4: "${auth.slice(0, 40)}"`;
  if (match[1] !== service) return `signed for service "${match[1]}", expected "${service}"`;
  if (!req.headers['x-amz-date']) return 'no x-amz-date header';
  return undefined;
}

function xmlEscape(text: string): string {
  return text.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The SNS query parameters of one PublishBatch entry (`PublishBatchRequestEntries.member.N.*`). */
function snsEntries(form: URLSearchParams): DecodedEntry[] {
  const entries: DecodedEntry[] = [];
  for (
    let n = 1;
    form.has(`PublishBatchRequestEntries.member.${n}.Id`) ||
    form.has(`PublishBatchRequestEntries.member.${n}.Message`);
    n++
  ) {
    const p = `PublishBatchRequestEntries.member.${n}`;
    const attributes: Record<string, { dataType: string; value: string }> = {};
    for (let a = 1; form.has(`${p}.MessageAttributes.entry.${a}.Name`); a++) {
      const q = `${p}.MessageAttributes.entry.${a}`;
      attributes[form.get(`${q}.Name`) ?? ''] = {
        dataType: form.get(`${q}.Value.DataType`) ?? '',
        value: form.get(`${q}.Value.StringValue`) ?? '',
      };
    }
    entries.push({
      id: form.get(`${p}.Id`) ?? undefined,
      body: form.get(`${p}.Message`) ?? '',
      attributes,
      groupId: form.get(`${p}.MessageGroupId`) ?? undefined,
      deduplicationId: form.get(`${p}.MessageDeduplicationId`) ?? undefined,
    });
  }
  return entries;
}

interface JsonAttribute {
  readonly DataType?: string;
  readonly StringValue?: string;
}

/** Starts the endpoint on a free loopback port. */
export async function startAwsLoopback(): Promise<AwsLoopback> {
  const requests: RecordedRequest[] = [];
  const violations: string[] = [];
  let hanging = 0;

  const state: Pick<AwsLoopback, 'decideEntry' | 'decideRequest'> = {
    decideEntry: () => 'ok',
    decideRequest: () => 'entries',
  };

  function refuse(
    res: ServerResponse,
    service: RecordedRequest['service'],
    code: string,
    message: string,
    status = 400,
  ) {
    if (service === 'sns') {
      res.writeHead(status, { 'content-type': 'text/xml' });
      res.end(
        `<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>${status < 500 ? 'Sender' : 'Receiver'}</Type><Code>${code}</Code><Message>${xmlEscape(message)}</Message></Error><RequestId>${randomUUID()}</RequestId></ErrorResponse>`,
      );
    } else {
      const type = service === 'sqs' ? `com.amazonaws.sqs#${code}` : code;
      res.writeHead(status, {
        'content-type': service === 'sqs' ? 'application/x-amz-json-1.0' : 'application/x-amz-json-1.1',
        'x-amzn-requestid': randomUUID(),
        ...(service === 'sqs'
          ? { 'x-amzn-query-error': `AWS.SimpleQueueService.${code};${status < 500 ? 'Sender' : 'Receiver'}` }
          : {}),
      });
      res.end(JSON.stringify({ __type: type, message }));
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const target = String(req.headers['x-amz-target'] ?? '');
    const contentType = String(req.headers['content-type'] ?? '');

    let request: RecordedRequest;
    let problems: string[];
    if (req.method === 'POST' && contentType.startsWith('application/x-www-form-urlencoded')) {
      const form = new URLSearchParams(raw);
      const action = form.get('Action') ?? '';
      request = {
        service: 'sns',
        action,
        target: form.get('TopicArn') ?? undefined,
        entries: snsEntries(form),
      };
      problems = [];
      const sig = signatureProblem(req, 'sns');
      if (sig) problems.push(sig);
      if (action !== 'PublishBatch') problems.push(`unexpected SNS action ${action}`);
      if (form.get('Version') !== '2010-03-31') problems.push(`SNS API version ${form.get('Version')}`);
      if (
        !request.target ||
        !/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$/.test(request.target)
      ) {
        problems.push(`TopicArn "${request.target}" is not a topic ARN`);
      }
      problems.push(...sqsOrSnsProblems(request, request.target?.endsWith('.fifo') ?? false));
    } else if (target === 'AWSEvents.PutEvents' && contentType === 'application/x-amz-json-1.1') {
      const body = JSON.parse(raw) as { Entries?: Array<Record<string, unknown>> };
      request = {
        service: 'eventbridge',
        action: 'PutEvents',
        entries: (body.Entries ?? []).map((e) => ({
          body: typeof e.Detail === 'string' ? e.Detail : '',
          attributes: {},
          source: typeof e.Source === 'string' ? e.Source : undefined,
          detailType: typeof e.DetailType === 'string' ? e.DetailType : undefined,
          eventBus: typeof e.EventBusName === 'string' ? e.EventBusName : undefined,
        })),
      };
      problems = [signatureProblem(req, 'events'), ...putEventsProblems(request)].filter(
        (p): p is string => !!p,
      );
    } else if (target === 'AmazonSQS.SendMessageBatch' && contentType === 'application/x-amz-json-1.0') {
      const body = JSON.parse(raw) as { QueueUrl?: string; Entries?: Array<Record<string, unknown>> };
      request = {
        service: 'sqs',
        action: 'SendMessageBatch',
        target: body.QueueUrl,
        entries: (body.Entries ?? []).map((e) => ({
          id: typeof e.Id === 'string' ? e.Id : undefined,
          body: typeof e.MessageBody === 'string' ? e.MessageBody : '',
          attributes: Object.fromEntries(
            Object.entries((e.MessageAttributes ?? {}) as Record<string, JsonAttribute>).map(([k, v]) => [
              k,
              { dataType: v.DataType ?? '', value: v.StringValue ?? '' },
            ]),
          ),
          groupId: typeof e.MessageGroupId === 'string' ? e.MessageGroupId : undefined,
          deduplicationId:
            typeof e.MessageDeduplicationId === 'string' ? e.MessageDeduplicationId : undefined,
        })),
      };
      problems = [
        signatureProblem(req, 'sqs'),
        ...sqsOrSnsProblems(request, body.QueueUrl?.endsWith('.fifo') ?? false),
      ].filter((p): p is string => !!p);
    } else if (target === 'AmazonSQS.ReceiveMessage' && contentType === 'application/x-amz-json-1.0') {
      // Only so far that a consumer can poll: an answer without messages (or none at all, `hang`).
      const body = JSON.parse(raw) as { QueueUrl?: string };
      request = { service: 'sqs', action: 'ReceiveMessage', target: body.QueueUrl, entries: [] };
      problems = [signatureProblem(req, 'sqs')].filter((p): p is string => !!p);
    } else {
      violations.push(
        `unexpected request: ${req.method} ${req.url} target=${target} content-type=${contentType}`,
      );
      res.writeHead(400).end();
      return;
    }

    requests.push(request);
    if (problems.length > 0) {
      violations.push(...problems);
      const code =
        request.service === 'eventbridge'
          ? 'ValidationException'
          : request.service === 'sns'
            ? 'InvalidParameter'
            : 'InvalidParameterValue';
      refuse(res, request.service, code, problems.join('; '));
      return;
    }
    const whole = state.decideRequest(request);
    if (whole === 'hang') {
      hanging += 1;
      return;
    }
    if (whole !== 'entries') {
      refuse(res, request.service, whole.code, whole.message ?? whole.code, whole.status);
      return;
    }
    if (request.action === 'ReceiveMessage') {
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-requestid': randomUUID() });
      res.end(JSON.stringify({ Messages: [] }));
      return;
    }
    const decisions = request.entries.map((entry) => state.decideEntry(entry, request));
    if (request.service === 'eventbridge') {
      const entries = decisions.map((d) =>
        d === 'ok'
          ? { EventId: randomUUID() }
          : d === 'blank'
            ? {}
            : { ErrorCode: d.code, ErrorMessage: d.message ?? d.code },
      );
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1', 'x-amzn-requestid': randomUUID() });
      res.end(
        JSON.stringify({ FailedEntryCount: decisions.filter((d) => d !== 'ok').length, Entries: entries }),
      );
    } else if (request.service === 'sqs') {
      const successful: object[] = [];
      const failed: object[] = [];
      request.entries.forEach((entry, i) => {
        const d = decisions[i];
        if (d === 'ok')
          successful.push({ Id: entry.id, MessageId: randomUUID(), MD5OfMessageBody: md5(entry.body) });
        else if (d && d !== 'blank')
          failed.push({
            Id: entry.id,
            Code: d.code,
            Message: d.message ?? d.code,
            SenderFault: d.senderFault,
          });
      });
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-requestid': randomUUID() });
      res.end(JSON.stringify({ Successful: successful, Failed: failed }));
    } else {
      let successful = '';
      let failed = '';
      request.entries.forEach((entry, i) => {
        const d = decisions[i];
        if (d === 'ok')
          successful += `<member><Id>${xmlEscape(entry.id ?? '')}</Id><MessageId>${randomUUID()}</MessageId></member>`;
        else if (d && d !== 'blank') {
          failed += `<member><Id>${xmlEscape(entry.id ?? '')}</Id><Code>${d.code}</Code><Message>${xmlEscape(d.message ?? d.code)}</Message><SenderFault>${d.senderFault}</SenderFault></member>`;
        }
      });
      res.writeHead(200, { 'content-type': 'text/xml' });
      res.end(
        `<PublishBatchResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><PublishBatchResult><Successful>${successful}</Successful><Failed>${failed}</Failed></PublishBatchResult><ResponseMetadata><RequestId>${randomUUID()}</RequestId></ResponseMetadata></PublishBatchResponse>`,
      );
    }
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      violations.push(`endpoint failure: ${String(error)}`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const loopback: AwsLoopback = {
    endpoint: `http://127.0.0.1:${port}`,
    requests,
    violations,
    get hanging() {
      return hanging;
    },
    get decideEntry() {
      return state.decideEntry;
    },
    set decideEntry(fn) {
      state.decideEntry = fn;
    },
    get decideRequest() {
      return state.decideRequest;
    },
    set decideRequest(fn) {
      state.decideRequest = fn;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return loopback;
}

function md5(text: string): string {
  return createHash('md5').update(text).digest('hex');
}
