import { sql, type Kysely } from 'kysely';

/**
 * DESIGN §8: a checkout the processor closed unpaid is told apart from one still open. A purchase is
 * `expired` after `checkout.session.expired` and `failed` after `checkout.session.async_payment_failed`;
 * `paid` still wins over either (credits once granted are what happened).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table purchases drop constraint purchases_status_check`.execute(db);
  await sql`alter table purchases add constraint purchases_status_check check (status in ('pending', 'paid', 'expired', 'failed'))`.execute(db);
}
