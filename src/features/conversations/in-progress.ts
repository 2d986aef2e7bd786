// DESIGN §4, §7: 409 STREAM_IN_PROGRESS, raised from here alone, for each reason a reply already streams.
import { AppError } from '../../http/errors.ts';

const WHY = {
  user: 'another reply is streaming for this user',
  conversation: 'another reply is streaming for this conversation',
  reply: 'the reply to this message is still streaming',
  replaced: 'the reply to the message being replaced is still streaming',
} as const;

export function streamInProgress(why: keyof typeof WHY): AppError {
  return new AppError('STREAM_IN_PROGRESS', WHY[why]);
}
