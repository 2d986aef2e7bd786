// The trader's wallet (credits, free turns left), one copy for the page: the chat shows what the next
// turn costs from it and reads it again after each turn; the credits page and its return page too.
import { useEffect, useState } from 'preact/hooks';
import { api, must, type Schemas } from './api/client.ts';
import { onSessionChange } from './session.ts';

export type Wallet = Schemas['Wallet'];

let current: Wallet | undefined;
let inFlight: Promise<Wallet> | undefined;
const listeners = new Set<(w: Wallet) => void>();
// Another user's wallet is not this one's.
onSessionChange(() => void (current = undefined));

/** Reads the wallet again; every page showing it follows. */
export function refreshWallet(): Promise<Wallet> {
  inFlight ??= must(api.GET('/api/billing/wallet'))
    .then((w) => {
      current = w;
      for (const l of listeners) l(w);
      return w;
    })
    .finally(() => (inFlight = undefined));
  return inFlight;
}

/** The wallet as last read (read once when the first component asks). */
export function useWallet(): Wallet | undefined {
  const [wallet, setWallet] = useState(current);
  useEffect(() => {
    listeners.add(setWallet);
    if (!current) refreshWallet().catch(() => undefined);
    return () => void listeners.delete(setWallet);
  }, []);
  return wallet;
}
