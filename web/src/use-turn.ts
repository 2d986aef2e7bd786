// One turn's life on the page (DESIGN §7, §12): its message sent and its reply's frames folded in
// (applyFrame), or a running reply attached to after a reload or a lost connection, until it ends.
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, must, type Schemas } from './api/client.ts';
import { EMPTY_REPLY, applyFrame, ended, type Frame, type Reply } from './reply.ts';
import { attach, sendMessage } from './stream.ts';
import { refreshWallet } from './wallet.ts';

/** The turn on screen while it runs (not yet in the stored conversation). */
export interface LiveTurn {
  /** The user message of this turn, as sent; none when the page attached to a reply it did not send. */
  readonly user: { readonly text: string; readonly previews: readonly string[] } | undefined;
  readonly reply: Reply;
  /** Stored messages this turn takes the place of (regenerate, retry, edit), hidden while it runs. */
  readonly replaces: readonly string[];
}

export interface TurnEvents {
  /** A new conversation got its id from its reply's first frame. */
  onStarted(conversationId: string): void;
  /** The reply ended (or its stream closed): the stored conversation is read again before the live turn goes. */
  onEnded(conversationId: string | undefined): Promise<void>;
  /** The service refused the message before its reply started: the live turn is gone. */
  onRefused(err: unknown): void;
  /** Stopping the reply failed. */
  onProblem(err: unknown): void;
}

export interface Outgoing {
  readonly text: string;
  /** Object URLs of the attached images, shown until the stored message shows them; revoked then. */
  readonly previews: readonly string[];
  readonly replaces: readonly string[];
  /** The request body (DESIGN §7). */
  readonly body: Record<string, unknown>;
}

export function useTurn(conversationId: string | undefined, events: TurnEvents) {
  const [live, setLive] = useState<LiveTurn | undefined>();
  const on = useRef(events);
  on.current = events;
  const idRef = useRef(conversationId);
  const replyRef = useRef<Reply>(EMPTY_REPLY);
  const pendingDraw = useRef<number | undefined>(undefined);
  const detach = useRef<(() => void) | undefined>(undefined);
  const abort = useRef<AbortController | undefined>(undefined);
  const firstFrameSeen = useRef(false);
  const previews = useRef<readonly string[]>([]);

  /** A frame drawn after the turn has ended would bring the ended turn back: one still waiting is dropped. */
  const dropPendingDraw = () => {
    if (pendingDraw.current !== undefined) cancelAnimationFrame(pendingDraw.current);
    pendingDraw.current = undefined;
  };

  // Frames arrive faster than a screen refreshes: they are applied at once and drawn once per frame.
  const take = useCallback((frame: Frame) => {
    replyRef.current = applyFrame(replyRef.current, frame);
    if (frame.event === 'delta' && !firstFrameSeen.current) {
      firstFrameSeen.current = true;
      performance.mark('reply-first-frame');
    }
    if (frame.event === 'start' && !idRef.current) {
      idRef.current = (frame.data as Schemas['StreamStartFrame']).conversationId;
      on.current.onStarted(idRef.current);
    }
    pendingDraw.current ??= requestAnimationFrame(() => {
      pendingDraw.current = undefined;
      setLive((l) => ({ user: l?.user, replaces: l?.replaces ?? [], reply: replyRef.current }));
    });
  }, []);

  const finish = useCallback(async () => {
    await on.current.onEnded(idRef.current);
    dropPendingDraw();
    refreshWallet().catch(() => undefined);
    // The stored message now shows the sent images (fetched from the service): the previews can go.
    for (const url of previews.current) URL.revokeObjectURL(url);
    previews.current = [];
    setLive(undefined);
  }, []);

  /** Follows the reply from the last frame taken in, until it ends (a reload or a lost connection lands here). */
  const resume = useCallback(
    (id: string) => {
      detach.current?.();
      setLive((l) => ({ user: l?.user, replaces: l?.replaces ?? [], reply: replyRef.current }));
      detach.current = attach(id, replyRef.current.lastEventId, take, () => {
        detach.current = undefined;
        void finish();
      });
    },
    [take, finish],
  );

  /** Attaches to a conversation's running reply from its start (the page opened on it). */
  const follow = useCallback(
    (id: string) => {
      replyRef.current = EMPTY_REPLY;
      resume(id);
    },
    [resume],
  );

  useEffect(
    () => () => {
      detach.current?.();
      abort.current?.abort();
      dropPendingDraw();
    },
    [],
  );

  /** Sends a message and follows its reply; false when the service refused it (told to onRefused). */
  const send = async (m: Outgoing): Promise<boolean> => {
    const id = idRef.current;
    const url = id ? `/api/advisor/conversations/${encodeURIComponent(id)}/messages/stream` : '/api/advisor/conversations/new/messages/stream';
    replyRef.current = EMPTY_REPLY;
    firstFrameSeen.current = false;
    performance.clearMarks('reply-first-frame');
    performance.clearMeasures('reply-first-text');
    previews.current = m.previews;
    setLive({ user: { text: m.text, previews: m.previews }, replaces: m.replaces, reply: EMPTY_REPLY });
    const controller = new AbortController();
    abort.current = controller;
    try {
      await sendMessage(url, m.body, take, controller.signal);
    } catch (err) {
      dropPendingDraw();
      setLive(undefined);
      on.current.onRefused(err);
      return false;
    }
    if (controller.signal.aborted) return true;
    if (!ended(replyRef.current) && idRef.current) resume(idRef.current);
    else await finish();
    return true;
  };

  const streaming = live !== undefined && !ended(live.reply);
  const stop = useCallback(async () => {
    const id = idRef.current;
    if (id) await must(api.POST('/api/advisor/conversations/{id}/stop', { params: { path: { id } } })).catch((err: unknown) => on.current.onProblem(err));
  }, []);

  // Escape stops a reply, wherever the focus is (an open editor or list takes its own Escape first).
  useEffect(() => {
    if (!streaming) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape' && !e.defaultPrevented) void stop();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [streaming, stop]);

  // The time from a reply's first frame to its text on screen (docs/PERFORMANCE.md; read by the browser
  // test): the text is in the DOM here, inside the animation frame that paints it; a task queued now runs
  // once that frame is painted.
  useLayoutEffect(() => {
    if (!firstFrameSeen.current || performance.getEntriesByName('reply-first-text').length > 0) return;
    if (!live?.reply.parts.some((p) => p.type === 'text' && p.text)) return;
    setTimeout(() => performance.getEntriesByName('reply-first-text').length === 0 && performance.measure('reply-first-text', 'reply-first-frame'), 0);
  }, [live]);

  /** The conversation's id: undefined until a new conversation's first frame names it. */
  const id = idRef.current;
  return { id, live, streaming, send, follow, stop };
}
