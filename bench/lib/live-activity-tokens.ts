/** The activity token of the i-th seeded device (80 bytes, as ActivityKit's are longer than device tokens). */
export const activityTokenOf = (i: number): string => Buffer.from(`${i}`.padStart(80, '0')).toString('hex');
