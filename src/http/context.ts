import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { Admission } from '../platform/admission.js';
import type { ActivityService } from '../services/activity.js';
import type { AppService } from '../services/apps.js';
import type { AudienceService } from '../services/audiences.js';
import type { AuditService } from '../services/audit.js';
import type { DeviceService } from '../services/devices.js';
import type { MessageStreamService } from '../services/message-streams.js';
import type { MessageService } from '../services/messages.js';
import type { NotificationService } from '../services/notifications.js';
import type { StatsService } from '../services/stats.js';
import type { TransactionalService } from '../services/transactional.js';
import type { LiveActivityService } from '../services/live-activities.js';
import type { JourneyService } from '../services/journeys.js';
import type { JourneyEngine } from '../services/journey-engine.js';
import type { WebhookService } from '../services/webhooks.js';
import type { TemplateService } from '../services/templates.js';

/** What the HTTP layer needs, built once at start-up (src/app/context.ts): settings, logging and the services. */
export interface HttpContext {
  config: Config;
  log: Logger;
  metrics: Metrics;
  /** refuses, at once, requests this process cannot start soon enough (src/http/overload.ts) */
  admission: Admission;
  services: {
    activity: ActivityService;
    apps: AppService;
    audiences: AudienceService;
    audit: AuditService;
    devices: DeviceService;
    notifications: NotificationService;
    stats: StatsService;
    transactional: TransactionalService;
    messages: MessageService;
    messageStreams: MessageStreamService;
    liveActivities: LiveActivityService;
    journeys: JourneyService;
    /** runs journeys' due steps (the workers' poller calls it) */
    journeyEngine: JourneyEngine;
    webhooks: WebhookService;
    templates: TemplateService;
  };
  /** Whether each store the service depends on answers now (GET /ready). */
  readiness(): Promise<Record<'database' | 'queue', 'ok' | 'unreachable'>>;
}
