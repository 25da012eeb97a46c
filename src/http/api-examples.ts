/**
 * Examples for the API reference (/docs), by route: request bodies and answers as a client sends and gets them.
 * test/http/openapi.test.ts checks each against the schema its route validates or serializes with.
 */
const ID = '0190f5d2-6c1e-7a3b-9d2e-5b1c0e8f4a21';
const AUDIENCE = '3f0b6c0e-1d2a-4b5c-8e9f-0a1b2c3d4e5f';
const DEVICE = '6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f';
const AT = '2026-11-20T09:00:00.120Z';

const notificationCreate = {
  body: [
    { notification: { to: '*', payload: { alert: 'Hello everyone', badge: 1, sound: 'default' } } },
    {
      notification: {
        to: [
          { name: 'locale', criteria: ['fr_FR', 'fr_BE'] },
          { name: 'events.purchase', criteria: [{ gt: 'now-7d/d' }] },
          { name: 'development', criteria: [true], not_filter: true },
        ],
        payload: { alert: 'Soldes !', collapse_key: 'sale' },
        send_at: '2026-12-24T09:00:00+01:00',
        ttl: 3600,
      },
    },
  ],
  answers: {
    201: [
      {
        id: ID,
        created_at: AT,
        state: 'scheduled',
        to: { id: AUDIENCE, type: 'Audience' },
        notification: { to: '*', payload: { alert: 'Hello everyone', badge: 1, sound: 'default' } },
      },
    ],
    400: [{ error: 'notification.payload.badge: must be an integer >= 0' }],
  },
};

export const API_EXAMPLES: Record<string, { body?: unknown[]; answers?: Record<number, unknown[]> }> = {
  'POST /v3/notifications': notificationCreate,
  'POST /v5/notifications': notificationCreate,
  'POST /v6/notifications': notificationCreate,
  'POST /v6/notifications/preview': {
    body: [{ notification: { to: '*', payload: { alert: 'Hello' }, localized: { fr: { alert: 'Bonjour' } } } }],
  },
  'POST /v6/notifications/:id/winner': { body: [{ variant: 1 }] },
  'POST /v6/transactional/notifications': {
    body: [
      {
        to: { field: 'user_id', value: 'customer-42' },
        group: 'order-shipped',
        notification: { payload: { alert: 'Your order has shipped' } },
        extra_filters: [{ name: 'locale', criteria: ['en_US'] }],
      },
    ],
    answers: { 200: [{ id: ID, results: { success: 2, uninstalled: 0, failures: [] } }] },
  },
  'POST /v6/devices': {
    body: [
      {
        device: {
          platform: 'ios',
          token: '80f3a7c1e2d4b6a8c0e2f4a6b8d0c2e4f6a8b0d2c4e6f8a0b2d4c6e8f0a2b4c6',
          locale: 'fr_FR',
          time_zone: 'Europe/Paris',
          tags: ['vip'],
          user_id: 'customer-42',
          user_id_auth_hash: '5d41c8a1f0f3e1c9b3a7d2e6f8a0b4c6d8e0f2a4b6c8d0e2f4a6b8c0d2e4f6a8',
          custom: { plan: { type: 'string', value: 'pro' } },
        },
      },
    ],
  },
  'PUT /v6/devices/:id': { body: [{ device: { badge: 3, custom: { plan: { type: 'string', value: 'free' }, age: null } } }] },
  'POST /v6/devices/:id/events': { body: [{ events: [{ name: 'purchase', date: '2026-11-20T10:00:00Z' }] }] },
  'POST /v6/users/:user_id/events': { body: [{ events: [{ name: 'signup' }] }] },
  'PUT /v6/users/:user_id': { body: [{ user: { custom: { plan: { type: 'string', value: 'pro' } } } }] },
  'POST /v6/devices/:id/sessions': {
    body: [{ session: { id: '0b6f3c9e-8a41-4d7a-9f1e-3c2b5a6d7e80', started_at: '2026-11-20T10:00:00Z' } }],
  },
  'POST /v6/devices/:id/opens': { body: [{ open: { _nid: ID, tapped: true } }] },
  'POST /v6/audiences/count': {
    body: [{ filters: [{ name: 'locale', criteria: ['fr_FR'] }] }],
    answers: { 200: [{ device_count: 1234 }] },
  },
  'PATCH /v6/app': {
    body: [{ default_time_zone: 'Europe/Paris', quiet_hours: { start: '22:00', end: '08:00', then: 'hold' } }],
  },
  'POST /v6/messages': {
    body: [
      {
        message: {
          to: [{ name: 'tags', criteria: ['vip'] }],
          title: 'Your VIP offer',
          text: '20 % off everything this week',
          url: 'myapp://offers/vip',
          custom: { coupon: 'VIP20' },
          notification: { payload: { alert: 'A new offer is waiting for you' } },
        },
      },
    ],
  },
  'POST /v6/devices/:id/messages/read': { body: [{ message_ids: [ID] }] },
  'POST /v6/live-activities': {
    body: [
      {
        live_activity: {
          event: 'update',
          activity_id: DEVICE,
          content_state: { eta: 5 },
          stale_date: '2026-05-01T12:30:00Z',
          priority: 'high',
        },
      },
    ],
  },
  'POST /v6/templates': {
    body: [
      {
        template: {
          name: 'Order shipped',
          payload: { alert: 'Hi {{ custom.first_name | default: "there" }}, order {{ data.order }} has shipped', sound: 'default' },
          localized: { fr: { alert: 'Bonjour {{ custom.first_name | default: "" }}, la commande {{ data.order }} est partie' } },
        },
      },
    ],
    answers: { 400: [{ error: 'template.payload.alert: line 1, col 4: undefined filter: shout' }] },
  },
  'PATCH /v6/templates/:id': { body: [{ template: { payload: { alert: 'Order {{ data.order }} is on its way' } } }] },
  'GET /health': { answers: { 200: [{ status: 'ok' }] } },
};

/** What every route that takes a key may answer for it. */
export const KEY_ERROR_EXAMPLES: Record<number, unknown[]> = {
  401: [{ error: 'unauthorized' }],
  403: [{ error: 'your api client does not have the correct roles' }],
  429: [{ error: 'rate limit exceeded: retry after 1 s' }],
};
