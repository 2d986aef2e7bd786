import { useEffect, useState } from 'preact/hooks';
import { authorizedFetch } from '../api/client.ts';

/** An attachment: its URL needs the bearer token, so it is fetched and shown from a blob: URL. */
export function AuthedImage({ url, alt }: { url: string; alt: string }) {
  const [src, setSrc] = useState<string | undefined>();
  useEffect(() => {
    let objectUrl: string | undefined;
    let live = true;
    void authorizedFetch(url)
      .then((r) => (r.ok ? r.blob() : undefined))
      .then((b) => {
        if (b && live) setSrc((objectUrl = URL.createObjectURL(b)));
      })
      .catch(() => undefined);
    return () => {
      live = false;
      if (objectUrl) URL.revokeObjectURL(objectUrl);
    };
  }, [url]);
  return src ? <img class="thumb" src={src} alt={alt} /> : <span class="thumb placeholder" role="img" aria-label={alt} />;
}
