import type { Db } from '../database.js';
import { TEMPLATE_DEVICE_COLUMNS, type StoredAttribute, type TemplateData, type TemplateDevice } from '../../domain/template-data.js';

/** What a render reads of the devices: their columns (`device.*`, `user.*`), and which custom attributes. */
export interface TemplateReads {
  columns: boolean;
  /** the attributes' names (null: every one; an empty list: none) */
  attributes: string[] | null;
}

/** What templates render with, read when a notification's payload has templates and only then. */
export class TemplateVariablesRepository {
  /** The notification's stored per-send values (null: none). */
  async dataOf(db: Db, notificationId: string): Promise<TemplateData | null> {
    const row = await db.selectFrom('notifications').select('template_data').where('id', '=', notificationId).executeTakeFirst();
    return row?.template_data ?? null;
  }

  /**
   * The devices' columns (when read; a device not found is then absent) and the custom attributes the templates
   * name, each in its stored order (an array's by position), by device id.
   */
  async devicesOf(
    db: Db,
    ids: string[],
    reads: TemplateReads = { columns: true, attributes: null },
  ): Promise<Map<string, { device?: TemplateDevice; attributes: StoredAttribute[] }>> {
    if (!ids.length) return new Map();
    const [rows, attributes] = await Promise.all([
      reads.columns ? db.selectFrom('devices').select(TEMPLATE_DEVICE_COLUMNS).where('id', 'in', ids).execute() : [],
      reads.attributes?.length === 0 ? [] : this.attributesOf(db, ids, reads.attributes),
    ]);
    type Read = { device?: TemplateDevice; attributes: StoredAttribute[] };
    const out = new Map<string, Read>(rows.map((device) => [device.id, { device, attributes: [] }]));
    for (const a of attributes) {
      let at = out.get(a.device_id);
      if (!at) {
        if (reads.columns) continue;
        at = { attributes: [] };
        out.set(a.device_id, at);
      }
      at.attributes.push(a);
    }
    return out;
  }

  private attributesOf(db: Db, ids: string[], names: string[] | null) {
    let query = db
      .selectFrom('device_attributes')
      .select(['device_id', 'name', 'is_array', 'str_value', 'num_value', 'date_value', 'bool_value'])
      .where('device_id', 'in', ids);
    if (names) query = query.where('name', 'in', names);
    return query.orderBy('device_id').orderBy('name').orderBy('position').execute();
  }
}
