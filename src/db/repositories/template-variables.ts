import type { Db } from '../database.js';
import { TEMPLATE_DEVICE_COLUMNS, type TemplateData, type TemplateDevice } from '../../domain/template-data.js';
import type { DeviceAttributeRow } from './devices.js';
import { DevicesRepository } from './devices.js';

/** What templates render with, read when a notification's payload has templates and only then. */
export class TemplateVariablesRepository {
  private readonly devices = new DevicesRepository();

  /** The notification's stored per-send values (null: none). */
  async dataOf(db: Db, notificationId: string): Promise<TemplateData | null> {
    const row = await db.selectFrom('notifications').select('template_data').where('id', '=', notificationId).executeTakeFirst();
    return row?.template_data ?? null;
  }

  /** The devices' fields and custom attributes, by device id (a device not found is absent). */
  async devicesOf(db: Db, ids: string[]): Promise<Map<string, { device: TemplateDevice; attributes: DeviceAttributeRow[] }>> {
    if (!ids.length) return new Map();
    const [rows, attributes] = await Promise.all([
      db.selectFrom('devices').select(TEMPLATE_DEVICE_COLUMNS).where('id', 'in', ids).execute(),
      this.devices.attributesOf(db, ids),
    ]);
    const out = new Map(rows.map((device) => [device.id, { device, attributes: [] as DeviceAttributeRow[] }]));
    for (const a of attributes) out.get(a.device_id)?.attributes.push(a);
    return out;
  }
}
