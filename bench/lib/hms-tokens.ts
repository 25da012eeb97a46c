/** The Huawei push token of the i-th seeded device (130 characters, as long as the ones HMS issues). */
export const hmsTokenOf = (i: number): string => Buffer.from(`${i}`.padStart(65, '0')).toString('hex');
