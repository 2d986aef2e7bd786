// The advisor catalogue, loaded once per page (a failed load is tried again by the next caller).
import { api, must } from './client.ts';
import type { Catalogue } from '../catalogue.ts';

let pending: Promise<Catalogue> | undefined;
export function loadCatalogue(): Promise<Catalogue> {
  pending ??= must(api.GET('/api/advisor/catalogue')).catch((err: unknown) => {
    pending = undefined;
    throw err;
  });
  return pending;
}
