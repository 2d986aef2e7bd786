import { useEffect, useRef, useState } from 'preact/hooks';
import type { ComponentChildren } from 'preact';
import type { Catalogue } from '../catalogue.ts';

export interface Picked {
  readonly id: string;
  readonly file: File;
  readonly format: 'png' | 'jpeg' | 'webp';
  readonly preview: string;
}

export interface Outgoing {
  readonly text: string;
  readonly personaId: string | undefined;
  readonly images: readonly Picked[];
}

const FORMATS: Record<string, Picked['format']> = { 'image/png': 'png', 'image/jpeg': 'jpeg', 'image/webp': 'webp' };
const mib = (n: number) => `${(n / 1024 / 1024).toFixed(n % (1024 * 1024) === 0 ? 0 : 1)} MiB`;

/**
 * The message box: text (Enter sends, Shift+Enter a new line), persona, images by picker, paste or drop,
 * with previews and the service's limits checked before anything is uploaded; `model` is the model
 * picker and what the next turn costs, shown beside the box. The box is emptied as a message is sent,
 * so the next one can be written while the reply streams; a refused message comes back to it.
 */
export function Composer(props: {
  catalogue: Catalogue | undefined;
  personaId: string | undefined;
  streaming: boolean;
  onSend: (m: Outgoing) => Promise<boolean>;
  onStop: () => void;
  model?: ComponentChildren;
}) {
  const [text, setText] = useState('');
  const [personaId, setPersonaId] = useState(props.personaId);
  const [images, setImagesState] = useState<Picked[]>([]);
  // Two additions in one tick (a paste and a drop) must both count: the list is also kept here, current at once.
  const current = useRef<Picked[]>([]);
  const setImages = (next: Picked[]) => {
    current.current = next;
    setImagesState(next);
  };
  const [problem, setProblem] = useState<string | undefined>();
  const [dragging, setDragging] = useState(false);
  const box = useRef<HTMLTextAreaElement>(null);
  const limits = props.catalogue?.limits ?? { maxTextChars: 50_000, maxImagesPerMessage: 4, maxImageBytes: 3 * 1024 * 1024 };

  useEffect(() => setPersonaId(props.personaId), [props.personaId]);
  // A window with a pointer is written in at once; a phone's keyboard opens when the trader taps the box.
  useEffect(() => {
    if (matchMedia('(pointer: fine)').matches) box.current?.focus();
  }, []);

  const add = (files: Iterable<File>) => {
    const next = [...current.current];
    const refused: string[] = [];
    for (const file of files) {
      const format = FORMATS[file.type];
      if (!format) refused.push(`${file.name || 'pasted file'} is not a PNG, JPEG or WebP image`);
      else if (file.size > limits.maxImageBytes)
        refused.push(`${file.name || 'pasted image'} is ${mib(file.size)}; an image may be at most ${mib(limits.maxImageBytes)}`);
      else if (next.length >= limits.maxImagesPerMessage) refused.push(`a message takes at most ${limits.maxImagesPerMessage} images`);
      else next.push({ id: crypto.randomUUID(), file, format, preview: URL.createObjectURL(file) });
    }
    setImages(next);
    setProblem(refused.length > 0 ? `${[...new Set(refused)].join('; ')}.` : undefined);
  };
  const removeImage = (id: string) => {
    const gone = current.current.find((i) => i.id === id);
    if (gone) URL.revokeObjectURL(gone.preview);
    setImages(current.current.filter((i) => i.id !== id));
  };

  const send = async () => {
    if (props.streaming) return;
    if (!text.trim()) return setProblem('Write a message first.');
    if (text.length > limits.maxTextChars) return setProblem(`A message may be at most ${limits.maxTextChars.toLocaleString()} characters.`);
    setProblem(undefined);
    const draft = { text, images };
    setText('');
    setImages([]);
    const sent = await props.onSend({ text: draft.text, personaId, images: draft.images });
    // Refused before any reply: the message is the trader's again, unless they have started another.
    if (!sent && current.current.length === 0) setImages(draft.images);
    if (!sent) setText((now) => (now === '' ? draft.text : now));
  };

  return (
    <form
      class={`composer${dragging ? ' dragging' : ''}`}
      aria-label="Message the advisor"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
      onDragOver={(e) => {
        if (e.dataTransfer?.types.includes('Files')) {
          e.preventDefault();
          setDragging(true);
        }
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        e.preventDefault();
        setDragging(false);
        if (e.dataTransfer?.files) add(e.dataTransfer.files);
      }}
    >
      {images.length > 0 && (
        <ul class="previews" aria-label="Images to send">
          {images.map((i) => (
            <li key={i.id}>
              <img src={i.preview} alt={i.file.name || 'pasted image'} />
              <button type="button" class="icon" onClick={() => removeImage(i.id)} aria-label={`Remove ${i.file.name || 'pasted image'}`}>
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      <label class="sr-only" for="message">
        Message
      </label>
      <textarea
        id="message"
        ref={box}
        rows={3}
        value={text}
        placeholder="Ask about a trade, a chart, your accounts… (Enter sends, Shift+Enter for a new line)"
        onInput={(e) => setText(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
            e.preventDefault();
            void send();
          }
        }}
        onPaste={(e) => {
          const files = [...(e.clipboardData?.files ?? [])];
          if (files.length > 0) {
            e.preventDefault();
            add(files);
          }
        }}
      />
      <div class="composer-bar">
        <label class="file">
          <span>Add images</span>
          <input
            type="file"
            accept="image/png,image/jpeg,image/webp"
            multiple
            onChange={(e) => (add(e.currentTarget.files ?? []), (e.currentTarget.value = ''))}
          />
        </label>
        <label class="persona">
          <span class="sr-only">Persona</span>
          <select value={personaId ?? ''} onChange={(e) => setPersonaId(e.currentTarget.value || undefined)} aria-label="Persona">
            <option value="">No persona</option>
            {props.catalogue?.personas.map((p) => (
              <option key={p.personaId} value={p.personaId}>
                {p.name}
              </option>
            ))}
          </select>
        </label>
        {props.model}
        <span class="grow" />
        {props.streaming ? (
          <button type="button" class="danger" onClick={props.onStop}>
            Stop
          </button>
        ) : (
          <button type="submit">Send</button>
        )}
      </div>
      {problem && (
        <p class="problem" role="alert">
          {problem}
        </p>
      )}
    </form>
  );
}

export async function base64Of(file: File): Promise<string> {
  const url = await new Promise<string>((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error ?? new Error('could not read the image'));
    reader.readAsDataURL(file);
  });
  return url.slice(url.indexOf(',') + 1);
}
