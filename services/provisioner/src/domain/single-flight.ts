/**
 * Runs a pass one at a time: a trigger while one runs returns it and asks for one more right after it (what
 * triggered may have happened after the running pass read its state). A failed pass resolves to `onError`'s
 * value; the next trigger or timer tries again.
 */
export function singleFlight<T>(pass: () => Promise<T>, onError: (err: unknown) => T): () => Promise<T> {
  let running: Promise<T> | undefined;
  let again = false;
  const trigger = (): Promise<T> => {
    if (running) {
      again = true;
      return running;
    }
    running = pass()
      .catch(onError)
      .finally(() => {
        running = undefined;
        if (again) {
          again = false;
          void trigger();
        }
      });
    return running;
  };
  return trigger;
}
