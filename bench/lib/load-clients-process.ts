import type { ClientsOptions, Post } from './load-clients.js';
import { clientsPosting } from './load-clients-core.js';

/**
 * The clients' process of LoadClients (`where: 'process'`): as the thread, but on a process of its own, as a
 * backend is. It reports how many posts are answered every 50 ms while it posts (the backlog samples read it).
 */
const options = JSON.parse(process.argv[2]!) as ClientsOptions;
let answered = 0;
const clients = clientsPosting(options, () => (answered += 1));

process.on('message', ({ list, perSecond }: { list: Post[]; perSecond: number }) => {
  answered = 0;
  const progress = setInterval(() => process.send!({ answered }), 50);
  void clients.postAll(list, perSecond).then((answers) => {
    clearInterval(progress);
    // typed arrays do not survive IPC's JSON: plain arrays, turned back by the parent
    process.send!({
      answers: {
        ...answers,
        latencies: Array.from(answers.latencies),
        statuses: Array.from(answers.statuses),
        late: Array.from(answers.late ?? []),
      },
    });
  });
});
process.on('SIGTERM', () => void clients.close().then(() => process.exit(0)));
